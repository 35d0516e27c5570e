"""`tpuctl profile JOB --seconds N`: a profile of a running JAX or TensorFlow job, taken on
every worker at the same moment and brought home where XProf and TensorBoard read it.

The agent bundle's `profile` program runs on every worker over SSH (agent/profile.py):
it asks each process of the job that imported jax or tensorflow to trace itself with its
framework's profiler (the listener tpuctl's sitecustomize starts: agent/sitehook.py),
uploads each trace to the bucket (protocol.profile_path) and says its name, size and
sha256 on stdout. Every worker gets the same start time: the client's clock once every
worker is connected, plus a lead (the clocks of the VMs and this machine are taken to
agree, as NTP keeps them; a worker whose clock disagrees starts at once and says so).

What comes home is checked: the bucket is shared ground, so a trace is downloaded only
under a name a worker said over SSH, only when the object has the size it said, and
kept only when its content has the sha256 it said (a trace is data, never run; it is
streamed to disk, never held in memory). It lands in
`<dest>/plugins/profile/<stamp>/<name>.xplane.pb`, the layout of a TensorBoard log
directory: `xprof server --logdir <dest>` (or `tensorboard --logdir <dest>` with the
profile plugin) opens it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tpuctl.agent import bundle, protocol
from tpuctl.errors import TpuctlError
from tpuctl.services import live_logs, remote
from tpuctl.services.outputs import sha256

if TYPE_CHECKING:
    from tpuctl.cloud.backend import TpuBackend
    from tpuctl.cloud.ssh import Endpoint, Session, SshApi
    from tpuctl.cloud.storage import Bucket

MOST_SECONDS = 300.0  # the longest profile (a trace grows with its length)
LEAD = 3.0  # seconds from the moment every worker is connected to the start
GATHER = 30.0  # seconds the connected workers wait for the others before they start
MOST_SAID = 1 << 20  # bytes of a worker's stdout and stderr kept
NAME = re.compile(r"worker-(\d+)(-\d+)?")


REFUSALS = live_logs.Refusals(
    nothing="there is nothing to profile",
    refusal="it is not profiled there",
)


@dataclass
class Trace:
    """One trace a worker said it uploaded."""

    worker: int
    name: str  # worker-<k>, or worker-<k>-<pid>
    size: int
    sha256: str
    framework: str
    began: float


@dataclass
class Profile:
    """One take: its stamp (the folder in the bucket and at home), the traces, and why a
    worker has none."""

    stamp: str
    traces: list[Trace] = field(default_factory=list)
    missing: dict[int, str] = field(default_factory=dict)
    notes: dict[int, list[str]] = field(default_factory=dict)


def take(
    bucket: Bucket,
    tpu: Sequence[TpuBackend],
    ssh: SshApi,
    job_id: str,
    seconds: float,
    worker: int | None = None,
    say: Callable[[str], None] = lambda _: None,
) -> Profile:
    """A profile of `seconds` of the job's JAX or TensorFlow processes on every worker
    running its script (or `worker`), all started at the same moment; `say` is told
    when it starts."""
    running, plan = live_logs.running_plan(bucket, tpu, ssh, job_id, worker, REFUSALS)
    taken = Profile(time.strftime("%Y%m%d-%H%M%S", time.gmtime()))
    agent = bundle.build()
    say(f"profiling job {job_id} for {seconds:g}s on {len(running)} worker(s)...")
    start = _Start(len(plan.endpoints))

    async def one(session: Session, ep: Endpoint) -> int:
        installed = await session.run(bundle.install_command(), lambda *_: None, stdin=agent)
        at = await start.when(ep.worker)
        if installed:
            return int(installed)
        said = {"stdout": bytearray(), "stderr": bytearray()}

        def keep(stream: str, data: bytes) -> None:
            said[stream].extend(data[: max(0, MOST_SAID - len(said[stream]))])

        status = await session.run(
            bundle.command(
                "profile",
                *("--job-id", job_id, "--bucket", bucket.name, "--worker", str(ep.worker)),
                *("--stamp", taken.stamp, "--at", f"{at:.3f}", "--seconds", f"{seconds:g}"),
            ),
            keep,
        )
        lines = said["stderr"].decode(errors="replace").strip().splitlines()
        traces = _said(ep.worker, said["stdout"].decode(errors="replace"))
        taken.traces += traces
        if lines:
            taken.notes[ep.worker] = lines[-5:]
        if not traces:
            taken.missing[ep.worker] = lines[-1] if lines else f"exit status {status}"
        return 0

    for result in remote.on_workers(ssh, plan, one, connect_timeout=30.0):
        if result.status:
            taken.missing[result.worker] = result.error or f"exit status {result.status}"
    taken.traces.sort(key=lambda t: (t.worker, t.name))
    return taken


class _Start:
    """The one start time of every worker: LEAD seconds after the last of them is
    connected (or GATHER seconds after the first is, when one never is)."""

    def __init__(self, expected: int) -> None:
        self.expected, self.at = expected, 0.0
        self.arrived: set[int] = set()
        self.ready: asyncio.Event | None = None

    async def when(self, worker: int) -> float:
        self.ready = self.ready or asyncio.Event()
        self.arrived.add(worker)
        if len(self.arrived) >= self.expected:
            self.ready.set()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.ready.wait(), GATHER)
        self.at = self.at or time.time() + LEAD
        return self.at


def _said(worker: int, stdout: str) -> list[Trace]:
    """The traces a worker's agent said it uploaded (its JSON lines; anything else, and a
    name not of this worker, is passed over)."""
    traces = []
    for line in stdout.splitlines():
        with contextlib.suppress(ValueError, TypeError, KeyError):
            value = json.loads(line)
            match = NAME.fullmatch(str(value["name"]))
            if not match or int(match.group(1)) != worker:
                continue
            traces.append(
                Trace(
                    worker,
                    match.group(0),
                    int(value["size"]),
                    str(value["sha256"]),
                    str(value.get("framework") or "?"),
                    float(value.get("began") or 0.0),
                )
            )
    return traces


@dataclass
class Home:
    """What came home, and what stayed in the bucket and why."""

    written: list[Path] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)  # trace name -> why


def bring_home(bucket: Bucket, job_id: str, taken: Profile, dest: Path) -> Home:
    """Each trace into `dest/plugins/profile/<stamp>/<name>.xplane.pb`, when the bucket's
    object has the size and the content the worker said."""
    home = Home()
    run = dest / "plugins" / "profile" / taken.stamp
    sizes = {o.name: o.size for o in bucket.objects(protocol.job_path(job_id, "profile", ""))}
    for trace in taken.traces:
        name = protocol.profile_path(job_id, taken.stamp, trace.name)
        if sizes.get(name) != trace.size:
            home.refused[trace.name] = (
                f"the bucket's object has {sizes.get(name, 'no')} bytes, the worker "
                f"uploaded {trace.size}: left there"
            )
            continue
        target = run / f"{trace.name}.xplane.pb"
        part = target.with_name(f".{target.name}.tpuctl-part")
        try:
            bucket.download_to(name, part, trace.size)
        except TpuctlError as e:
            part.unlink(missing_ok=True)
            home.refused[trace.name] = f"it could not be downloaded: {e}"
            continue
        if sha256(part) != trace.sha256:
            part.unlink()
            home.refused[trace.name] = "its content changed in the bucket since it was uploaded"
            continue
        os.replace(part, target)
        home.written.append(target)
    return home
