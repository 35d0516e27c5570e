"""`tpuctl stacks JOB`: the Python stacks of a running job's processes on every worker,
taken by the agent bundle's `stacks` program over SSH (agent/stacks.py: py-spy where the
VM has it, else faulthandler on SIGUSR2), kept in the bucket by the agents
(protocol.stacks_path), and grouped: workers whose stacks are the same are shown once,
a worker whose stacks differ from the rest is called out (a hang on many workers is most
often the one worker waiting elsewhere)."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tpuctl.agent import bundle, protocol
from tpuctl.services import live_logs, remote

if TYPE_CHECKING:
    from tpuctl.cloud.backend import TpuBackend
    from tpuctl.cloud.ssh import Endpoint, Session, SshApi
    from tpuctl.cloud.storage import Bucket

MOST = 4 << 20  # bytes of one worker's stacks that are kept (the rest is cut)
# What differs between workers running the same code and is no difference of where
# they are: thread ids (faulthandler's `Thread 0x7f...`, py-spy's `Thread 1234`), pids.
_NOISE = (
    (re.compile(r"^(Current thread|Thread) (0x[0-9a-f]+|\d+)", re.M), r"\1"),
    (re.compile(r"^== process \d+:", re.M), "== process:"),
    (re.compile(r"^Process \d+:", re.M), "Process:"),
    (re.compile(r"^#.*\n", re.M), ""),
)


REFUSALS = live_logs.Refusals(
    nothing="there are no stacks to take",
    refusal="its stacks are not taken there",
)


@dataclass
class Taken:
    """One take: its stamp (the folder in the bucket), each worker's stacks, and why a
    worker has none."""

    stamp: str
    stacks: dict[int, str] = field(default_factory=dict)
    missing: dict[int, str] = field(default_factory=dict)
    notes: dict[int, str] = field(default_factory=dict)  # e.g. not stored in the bucket


def take(
    bucket: Bucket,
    tpu: Sequence[TpuBackend],
    ssh: SshApi,
    job_id: str,
    worker: int | None = None,
) -> Taken:
    """The stacks of the job's script on every worker running it (or `worker`)."""
    running, plan = live_logs.running_plan(bucket, tpu, ssh, job_id, worker, REFUSALS)
    taken = Taken(time.strftime("%Y%m%d-%H%M%S", time.gmtime()))
    agent = bundle.build()

    async def one(session: Session, ep: Endpoint) -> int:
        installed = await session.run(bundle.install_command(), lambda *_: None, stdin=agent)
        if installed:
            return int(installed)
        out, err = bytearray(), bytearray()

        def keep(stream: str, data: bytes) -> None:
            into = out if stream == "stdout" else err
            into.extend(data[: max(0, MOST - len(into))])

        status = await session.run(
            bundle.command(
                "stacks",
                *("--job-id", job_id, "--bucket", bucket.name, "--worker", str(ep.worker)),
                *("--stamp", taken.stamp, "--group", str(running[ep.worker]["child_pid"])),
            ),
            keep,
        )
        last = err.decode(errors="replace").strip().splitlines()
        why = last[-1] if last else f"exit status {status}"
        if out:
            taken.stacks[ep.worker] = out.decode(errors="replace")
            if last:
                taken.notes[ep.worker] = why
        else:
            taken.missing[ep.worker] = why
        return 0

    for result in remote.on_workers(ssh, plan, one, connect_timeout=30.0):
        if result.status:
            taken.missing[result.worker] = result.error or f"exit status {result.status}"
    return taken


def folder(job_id: str, stamp: str) -> str:
    """Where a take's files are in the bucket."""
    return protocol.job_path(job_id, "stacks", stamp) + "/"


def comparable(text: str) -> str:
    """A worker's stacks as compared with the others' (thread ids and pids left out)."""
    for pattern, replacement in _NOISE:
        text = pattern.sub(replacement, text)
    return text.strip() + "\n"


def grouped(stacks: dict[int, str]) -> list[tuple[list[int], str]]:
    """The distinct stacks, each with the workers that have them: the most shared
    first (then by their first worker)."""
    groups: dict[str, list[int]] = {}
    for w, text in sorted(stacks.items()):
        groups.setdefault(comparable(text), []).append(w)
    return sorted(((ws, t) for t, ws in groups.items()), key=lambda g: (-len(g[0]), g[0]))
