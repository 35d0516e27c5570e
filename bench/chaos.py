"""`make chaos`: tpuctl's promises measured the way users and attackers break them.

Drives real `tpuctl` processes against an emulator of its own (a detached one on a free
port of 127.0.0.1, stopped at the end) and prints one Markdown table for
docs/reliability.md:

- faults:   `run` jobs under 30% transient API faults (429, 500, 503, 504; half of them
            after the request took effect), exit codes alternating: the exit status must
            be the script's, no node may be left, no traceback printed;
- sigkill:  the client SIGKILLed at a random moment of a `run`: no node may outlive
            the job's end or its start deadline by more than a minute (worst case shown);
- signals:  SIGINT, SIGTERM or SIGHUP at a random moment of `run`, `create` and
            `create --queued`: nothing left that the user did not ask to keep (a plain
            `create` keeps its node, and must say so);
- input:    a catalogue of malformed inputs (`--zone ""` counts as no zone, as in
            gcloud): one `error:` line each, a usage or configuration exit code, never a
            traceback or an `unexpected` error;
- underneath: while a `run` job runs, its agent is SIGKILLed, or its script, or its node
            is deleted or preempted (with notice), or the emulator is restarted: `run`
            must end within 2 minutes, non-zero, with an `error:` line, and no node may be
            left a minute later;
- hostkeys: guest attributes carrying malformed or injected host keys, then `tpuctl
            exec`: the known-hosts file may hold only single well-formed keys, each for
            its worker's own address;
- rewritten, squatted: a job's request rewritten between attempts, and the default
            bucket created first by another project (bench/chaos_trust.py);
- claims, lease, keep, sweep: races between actors (bench/chaos_races.py): two `run
            --node` at once, a client killed between READY and its agents' start, a
            `keep` while gc waits for its confirmation, a sweep's runs started at once on
            a new machine;
- faults-compute, sigkill-compute, signals-compute, preempt-compute: on Compute Engine,
            a TPU7x VM and a v6e slice of four VMs in turn, `run` under 30% API faults,
            SIGKILLed, or given SIGINT once or twice (and `create` too); and one VM of a
            slice preempted mid-job, with and without notice (bench/chaos_compute.py,
            bench/chaos_compute_signals.py);
- multislice-compute: `run --slices 2` on Compute Engine (two TPU7x slices) under 30%
            API faults, SIGKILLed at a random moment, and with one slice preempted
            mid-job and `--restarts 1` (bench/chaos_compute_multislice.py).

The fault and SIGKILL runs go a few at a time, each in a project of its own (so each
run's nodes are told apart), which keeps the full harness near its 15-minute budget.

`--quick` runs a few of each (seeded), as `tests/test_chaos.py` does inside `make test`;
`--only NAME` (repeatable) runs some: a scenario, or `compute` (every Compute Engine
scenario) or `tpu` (the others).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import platform
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import chaos_compute  # noqa: E402  (bench/, beside this file)
import chaos_compute_multislice  # noqa: E402
import chaos_compute_signals  # noqa: E402
import chaos_races  # noqa: E402
import chaos_trust  # noqa: E402

from tpuctl.emulator.control.client import EmulatorControl  # noqa: E402
from tpuctl.emulator.core.ports import free_port  # noqa: E402

JOB = "import sys, time\ntime.sleep(float(sys.argv[1]))\nsys.exit(int(sys.argv[2]))\n"
ZONE = "us-central1-a"


@dataclass
class Outcome:
    name: str
    runs: int = 0
    good: int = 0
    leaked: int = 0
    tracebacks: int = 0
    notes: list[str] = field(default_factory=list)
    worst: float = 0.0  # seconds (what it measures is said in the note)

    def count_gone(self, gone: float | None, late: str) -> None:
        """One run measured by how long its node took to go (None: it did not, `late`)."""
        self.runs += 1
        if gone is None:
            self.leaked += 1
            self.notes.append(late)
        else:
            self.good += 1
            self.worst = max(self.worst, gone)

    def row(self) -> str:
        worst = f"{self.worst:.1f} s" if self.worst else "-"
        note = "; ".join(dict.fromkeys(self.notes))[:300] or "-"
        return (
            f"| {self.name} | {self.good}/{self.runs} | {self.leaked} | {self.tracebacks} "
            f"| {worst} | {note} |"
        )


class Harness:
    def __init__(self, root: Path, seed: int) -> None:
        self.root = root
        self.seed = seed
        self.random = random.Random(seed)
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        home = root / "home"
        home.mkdir()
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("TPUCTL_", "CLOUDSDK"))},
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(root / "config"),
            "XDG_STATE_HOME": str(root / "state"),
            "CLOUDSDK_CONFIG": str(root / "gcloud"),
            "TPUCTL_EMULATOR_HOST": self.address,
            "NO_COLOR": "1",
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        }
        # the job's own folder: a work dir is shipped whole, and must not hold the
        # emulator's state, which changes under the upload
        (root / "job").mkdir()
        self.script = root / "job" / "job.py"
        self.script.write_text(JOB)
        self.control = EmulatorControl(self.address)

    # -- the emulator --------------------------------------------------------------
    def __enter__(self) -> Harness:
        r = self.tpuctl("emulator", "start", "--detach", "--port", str(self.port),
                        "--state-dir", str(self.root / "emulator"))  # fmt: skip
        if r.returncode != 0:
            raise SystemExit(f"cannot start the emulator: {r.stderr}")
        return self

    def __exit__(self, *_: object) -> None:
        self.tpuctl("emulator", "stop", "--state-dir", str(self.root / "emulator"))

    def reset(self, instant: bool) -> None:
        self.control.call("POST", "reset", {})
        if instant:
            self.control.durations(create=0, stop=0, start=0, delete=0)
        self.control.durations(queued_accept=0, queued_schedule=0.5)

    def leftovers(self, project: str | None = None) -> list[str]:
        """Names of the nodes and queued resources left (of `project`, or of all)."""
        found = list(self.control.call("GET", "nodes")) + list(self.control.call("GET", "queued"))
        names = [str(x["name"]) for x in found]
        if project is not None:
            names = [n for n in names if n.startswith(f"projects/{project}/")]
        return [n.rsplit("/", 1)[-1] for n in names]

    def clean(self) -> None:
        """Delete whatever a scenario left, so the next starts from nothing."""
        self.control.faults()
        for full in [str(x["name"]) for x in self.control.call("GET", "nodes")]:
            project, zone, name = full.split("/")[1], full.split("/")[3], full.rsplit("/", 1)[-1]
            self.tpuctl("delete", name, "--zone", zone, "--project", project, "--yes",
                        "--missing-ok")  # fmt: skip
        for name in self.leftovers():
            self.tpuctl("delete", name, "--zone", ZONE, "--yes", "--missing-ok")

    # -- tpuctl --------------------------------------------------------------------
    def tpuctl(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tpuctl", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )

    def spawn(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "tpuctl", *args],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
        )

    def wait_gone(self, timeout: float, project: str | None = None) -> float | None:
        """Seconds until no node or request is left, or None if some still are."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if not self.leftovers(project):
                return time.monotonic() - start
            time.sleep(0.5)
        return None

    def restart_emulator(self) -> None:
        state = str(self.root / "emulator")
        self.tpuctl("emulator", "stop", "--state-dir", state)
        r = self.tpuctl("emulator", "start", "--detach", "--port", str(self.port),
                        "--state-dir", state)  # fmt: skip
        if r.returncode != 0:
            raise SystemExit(f"cannot restart the emulator: {r.stderr}")


def _traceback(text: str) -> bool:
    return "Traceback (most recent call last)" in text or "error: unexpected " in text


# -- scenarios -----------------------------------------------------------------------
def faults(h: Harness, runs: int) -> Outcome:
    out = Outcome("run under 30% API faults")
    h.reset(instant=True)
    h.control.faults(
        rate=0.3, codes=[429, 500, 503, 504], after_rate=0.5, seed=h.random.randrange(1 << 30)
    )

    def one(i: int) -> tuple[int, subprocess.CompletedProcess[str]]:
        code = (0, 1, 3)[i % 3]
        project = f"chaos-faults-{i}"  # a few at a time, each in a project of its own
        return code, h.tpuctl("run", str(h.script), "--zone", ZONE, "--project", project,
                              "--", "0", str(code))  # fmt: skip

    with ThreadPoolExecutor(3) as pool:
        for code, r in pool.map(one, range(runs)):
            out.runs += 1
            out.tracebacks += _traceback(r.stderr)
            if r.returncode == code and not _traceback(r.stderr):
                out.good += 1
            else:
                out.notes.append(f"exit {r.returncode} for {code}: {r.stderr.strip()[-160:]}")
    h.control.faults()
    left = h.leftovers()
    out.leaked = len(left)
    h.clean()
    return out


def sigkill(h: Harness, runs: int, deadline: float, at_once: int = 8) -> Outcome:
    out = Outcome("SIGKILL of run at a random moment")
    out.notes.append("worst: seconds from the kill until no node was left")
    h.reset(instant=False)
    h.control.quotas("granted")  # several jobs at once, each in a project of its own
    delays = [h.random.uniform(0.3, 6.0) for _ in range(runs)]

    def one(i: int) -> float | None:
        project = f"chaos-kill-{i}"
        proc = h.spawn("run", str(h.script), "--zone", ZONE, "--project", project,
                       *_deadline_flag(h, deadline), "--", "2", "0")  # fmt: skip
        time.sleep(delays[i])
        proc.kill()
        proc.communicate()
        # the job lasts 2 s; the start deadline bounds a node whose agents never started
        return h.wait_gone(timeout=deadline + 60 + 2, project=project)

    with ThreadPoolExecutor(at_once) as pool:
        for gone in pool.map(one, range(runs)):
            out.count_gone(gone, "a node outlived the start deadline by a minute")
    h.clean()
    return out


def signals(h: Harness, runs: int) -> Outcome:
    out = Outcome("SIGINT/TERM/HUP in run, create, create --queued")
    h.reset(instant=False)
    commands: list[tuple[str, list[str]]] = [
        ("run", ["run", str(h.script), "--zone", ZONE, "--", "3", "0"]),
        ("create", ["create", "chaos-keep", "-a", "v3-8", "--zone", ZONE]),
        ("queued", ["create", "chaos-q", "-a", "v3-8", "--zone", ZONE, "--queued"]),
    ]
    for i in range(runs):
        kind, args = commands[i % len(commands)]
        sig = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)[(i // len(commands)) % 3]
        proc = h.spawn(*args)
        # from the first tenth of a second (the imports) on; every other run twice
        time.sleep(h.random.uniform(0.05, 4.0))
        proc.send_signal(sig)
        if i % 2:
            time.sleep(h.random.uniform(0.0, 0.3))
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)
        try:
            _, err = proc.communicate(timeout=150)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            out.notes.append(f"{kind} ignored {sig.name} for 150 s")
        out.runs += 1
        out.tracebacks += _traceback(err)
        if _traceback(err):
            out.notes.append(f"{kind} after {sig.name}: a traceback, ending {err[-300:]!r}")
        mute = proc.returncode < 0 or (
            proc.returncode == 130 and not any(ln.startswith("error:") for ln in err.splitlines())
        )
        if mute:
            out.tracebacks += 1  # died by the signal, or ended without a word
            out.notes.append(f"{kind} after {sig.name}: exit {proc.returncode}, {err[-80:]!r}")
        left = h.leftovers()
        if (
            kind == "run"
            and left
            and ("will be deleted by its agent" in err or "is being deleted (the cloud has" in err)
        ):
            # a second signal left at once, as asked: the job's agent deletes the node
            # when the job ends (a 3 s job here), or the cloud has the run's delete of it
            # already; either way it must go
            left = [] if h.wait_gone(timeout=90) is not None else h.leftovers()
        name = args[1]
        if kind != "run" and left and set(left) == {name}:
            # A create that finished before the signal, or that was interrupted once its
            # node existed, leaves the user's node (and its request): fine when it said so.
            left = [] if (proc.returncode == 0 or name in err) else left
        if left:
            out.leaked += 1
            out.notes.append(
                f"{kind} after {sig.name}: left {', '.join(left)}, said {err[-400:]!r}"
            )
        elif not _traceback(err) and not mute:
            out.good += 1
        h.clean()
        h.wait_gone(timeout=60)
    return out


def _worker_processes(node: str) -> list[tuple[int, str]]:
    """(pid, command line) of the processes on the emulated workers of node `node`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if f"TPU_NAME={node}".encode() in environ and any(
            e.startswith(b"TPUCTL_EMULATOR_WORKER=") for e in environ
        ):
            found.append((int(entry), cmdline.decode(errors="replace")))
    return found


def _kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _wait(condition: Callable[[], object], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


UNDERNEATH = ("agent killed", "script killed", "node deleted", "node preempted",
              "emulator restarted")  # fmt: skip


@dataclass
class _Fault:
    """One run of the `underneath` scenario: what happened to it."""

    kind: str
    good: bool = False
    leaked: bool = False
    traceback: bool = False
    worst: float = 0.0
    note: str = ""


def underneath(h: Harness, each: int, heartbeat: str | None = None) -> Outcome:
    """Runs four at a time, each in a project of its own; the emulator's restarts, which
    every run would feel, one by one at the end."""
    out = Outcome("agent, script, node or emulator gone mid-job")
    out.notes.append("worst: seconds from the fault until run ended and no node was left")
    h.reset(instant=True)
    kinds = [UNDERNEATH[i % len(UNDERNEATH)] for i in range(each * len(UNDERNEATH))]
    delays = [h.random.uniform(0.0, 2.0) for _ in kinds]
    runs = list(enumerate(kinds))
    alone = [r for r in runs if r[1] == "emulator restarted"]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda r: _underneath_one(h, *r, delays[r[0]], heartbeat),
                                [r for r in runs if r not in alone]))  # fmt: skip
    results += [_underneath_one(h, i, kind, delays[i], heartbeat) for i, kind in alone]
    for r in results:
        out.runs += 1
        out.good += r.good
        out.leaked += r.leaked
        out.tracebacks += r.traceback
        out.worst = max(out.worst, r.worst)
        if r.note:
            out.notes.append(r.note)
    h.clean()
    return out


def _underneath_one(h: Harness, i: int, kind: str, delay: float, heartbeat: str | None) -> _Fault:
    result = _Fault(kind)
    project = f"chaos-gone-{i}"
    flags = ["--zone", ZONE, "--project", project]
    if kind == "node preempted":
        flags += ["--spot", "--restarts", "0"]
    if heartbeat:  # the quick version: a shorter wait for a dead agent
        flags += ["--heartbeat-deadline", heartbeat]
    proc = h.spawn("run", str(h.script), *flags, "--", "300", "0")
    node = ""

    def script_runs() -> bool:
        nonlocal node
        names = h.leftovers(project)
        node = names[0] if names else ""
        return bool(node) and any("job.py" in c for _, c in _worker_processes(node))

    if not _wait(script_runs, 120):
        proc.kill()
        proc.communicate()
        result.note = f"{kind}: the job never ran"
        return result
    time.sleep(delay)
    fault = time.monotonic()
    processes = _worker_processes(node)
    if kind == "agent killed":
        _kill([p for p, c in processes if "tpuctl-agent-" in c])
    elif kind == "script killed":
        _kill([p for p, c in processes if "job.py" in c and "tpuctl-agent-" not in c])
    elif kind == "node deleted":
        h.tpuctl("delete", node, "--zone", ZONE, "--project", project, "--yes")
    elif kind == "node preempted":
        h.control.preempt(f"projects/{project}/locations/{ZONE}/nodes/{node}", notice=3)
    else:
        h.restart_emulator()
    err, _ = chaos_compute.finish(proc, 150)
    ended = time.monotonic() - fault
    gone = h.wait_gone(timeout=60, project=project)
    result.traceback = _traceback(err)
    # an `error:` line, or the job's summary naming how it ended
    said = any(
        ln.startswith("error:") or any(w in ln for w in ("FAILED", "LOST", "PREEMPTED"))
        for ln in err.splitlines()
    )
    if gone is None:
        result.leaked = True
        result.note = f"{kind}: a node was left a minute after run ended"
    elif ended <= 120 and proc.returncode not in (0, None) and said and not result.traceback:
        result.good = True
        result.worst = ended + gone
    else:
        last = err.strip().splitlines()[-1:] or ["(nothing)"]
        result.note = f"{kind}: exit {proc.returncode} after {ended:.0f} s: {last[0][:120]}"
    return result


def _key(algorithm: str) -> str:
    """A well-formed public key blob of `algorithm` (base64)."""
    import asyncssh

    key = asyncssh.generate_private_key(algorithm)
    return key.export_public_key("openssh").split()[1].decode()


def _injections(real: str) -> list[str]:
    """Values for `hostkeys/ssh-ed25519` that must never reach the known-hosts file."""
    other = _key("ssh-ed25519")
    return [
        f"{real}\n* ssh-ed25519 {other}",
        f"{real}\n@cert-authority * ssh-ed25519 {other}",
        f"{real} * ssh-ed25519 {other}",
        f"{real}\r\n127.0.0.1 ssh-ed25519 {other}",
        "not base64 at all!",
        base64.b64encode(b"\0\0\0\x0bssh-ed25519\0\0\0\x05short").decode(),
        _key("ecdsa-sha2-nistp256"),  # a key of another type under the ed25519 name
        "A" * 100000,
        "",
    ]


def hostkeys(h: Harness, limit: int | None) -> Outcome:
    out = Outcome("injected host keys")
    out.notes.append("a run is right when every known-hosts line is one well-formed key "
                     "of the worker's own address")  # fmt: skip
    h.reset(instant=True)
    known = Path(h.env["XDG_STATE_HOME"]) / "tpuctl" / "known_hosts"
    r = h.tpuctl("create", "chaos-hk", "-a", "v3-8", "--zone", ZONE)
    if r.returncode != 0:
        raise SystemExit(f"cannot create a node: {r.stderr}")
    full = f"projects/tpuctl-demo/locations/{ZONE}/nodes/chaos-hk"
    node = next(n for n in h.control.call("GET", "nodes") if n["name"] == full)
    address = node["networkEndpoints"][0]["ipAddress"]
    real = _key("ssh-ed25519")
    cases = _injections(real)
    if limit is not None:
        cases = random.Random(h.seed).sample(cases, limit)
    for value in cases:
        known.unlink(missing_ok=True)
        h.control.set_guest_attributes(
            full, 0, [{"namespace": "hostkeys", "key": "ssh-ed25519", "value": value}]
        )
        r = h.tpuctl("exec", "chaos-hk", "--zone", ZONE, "--", "true", timeout=120)
        out.runs += 1
        out.tracebacks += _traceback(r.stderr)
        lines = known.read_text().splitlines() if known.exists() else []
        bad = [ln for ln in lines if not _well_formed(ln, address)]
        out.leaked += len(bad)
        if not bad and not _traceback(r.stderr):
            out.good += 1
        else:
            out.notes.append(f"injected: {bad[:1]!r}"[:160])
    h.clean()
    return out


def _well_formed(line: str, address: str) -> bool:
    """`[ADDRESS]:PORT TYPE BASE64 [tpuctl:COMMENT]` (or `ADDRESS ...`), one key that
    decodes to its type."""
    parts = line.split(" ")
    if len(parts) == 4 and parts[3].startswith("tpuctl:"):
        parts = parts[:3]
    if len(parts) != 3 or not (parts[0] == address or parts[0].startswith(f"[{address}]:")):
        return False
    algorithm, blob = parts[1], parts[2]
    try:
        raw = base64.b64decode(blob, validate=True)
    except ValueError:
        return False
    size = int.from_bytes(raw[:4], "big")
    return raw[4 : 4 + size].decode(errors="replace") == algorithm


BAD_INPUTS: list[tuple[list[str], dict[str, str]]] = [
    (["create", "Bad_Name"], {}),
    (["create", "-x"], {}),
    (["create", "ok", "-a", "v99-8"], {}),
    (["create", "ok", "--ttl", "soon"], {}),
    (["create", "ok", "--ttl", "9" * 400], {}),
    (["create", "ok", "--ttl", "999999999h"], {}),
    (["create", "ok", "--labels", "NOPE"], {}),
    (["create", "ok", "--labels", "Bad=x"], {}),
    (["create", "ok", "--idle-timeout", "-5m"], {}),
    (["create", "ok", "--idle-action", "explode", "--idle-timeout", "1h"], {}),
    (["create", "ok", "--spot", "--preemptible"], {}),
    (["create", "ok", "--zone", "nowhere-1"], {}),
    (["create", "ok", "--project", "BAD PROJECT!"], {}),
    (["create", "ok", "--valid-until", "1h"], {}),
    (["create", "ok", "--queued", "--valid-until-time", "yesterday"], {}),
    (["delete"], {}),
    (["delete", "UPPER"], {}),
    (["describe", "x" * 70], {}),
    (["stop", "a/b"], {}),
    (["start", "-"], {}),
    (["keep", "ok", "--ttl", "1x"], {}),
    (["quota", "--zone", "nowhere"], {}),
    (["quota", "--region", "mars-1"], {}),
    (["gc", "--older-than", "forever"], {}),
    (["gc", "--idle", "tomorrow"], {}),
    (["run"], {}),
    (["run", "missing.py"], {}),
    (["run", "job.py", "--env", "NOEQUALS"], {}),
    (["run", "job.py", "--env-file", "/nonexistent"], {}),
    (["run", "job.py", "--restarts", "-1"], {}),
    (["run", "job.py", "--sync-every", "0"], {}),
    (["run", "job.py", "--valid-until", "1h"], {}),
    (["run", "job.py", "--queued", "--node", "x"], {}),
    (["run", "job.py", "--steps", "10"], {}),
    (["run", "job.py", "--ttl", "1y1"], {}),
    (["ssh", "Bad"], {}),
    (["ssh", "ok", "--worker", "x"], {}),
    (["exec", "ok", "--worker", "3-1", "--", "true"], {}),
    (["exec", "ok"], {}),
    (["scp", "a", "b"], {}),
    (["scp", "ok:x", "ok:y"], {}),
    (["logs", "not-a-job"], {}),
    (["cancel", "../../etc"], {}),
    (["jobs", "--bucket", "gs://UPPER"], {}),
    (["emulator", "start", "--port", "99999"], {}),
    (["emulator", "start", "--port", "http"], {}),
    (["emulator", "preempt"], {}),
    (["list"], {"TPUCTL_EMULATOR_HOST": "not a host:xx"}),
    (["list"], {"TPUCTL_EMULATOR_HOST": "127.0.0.1:1"}),
    (["list"], {"TPUCTL_PROJECT": "UPPER CASE"}),
    (["list"], {"TPUCTL_ZONE": "nowhere"}),
    (["describe"], {}),
    (["nonsense-command"], {}),
    (["--no-such-flag"], {}),
]


def bad_input(h: Harness, limit: int | None) -> Outcome:
    out = Outcome("malformed input")
    h.reset(instant=True)
    # its own draw, so the sample does not depend on what ran before
    cases = BAD_INPUTS if limit is None else random.Random(h.seed).sample(BAD_INPUTS, limit)
    cwd = os.getcwd()
    os.chdir(h.script.parent)  # `job.py` is there
    try:
        for args, extra in cases:
            saved = dict(h.env)
            h.env.update(extra)
            try:
                r = h.tpuctl(*args, timeout=60)
            finally:
                h.env = saved
            out.runs += 1
            out.tracebacks += _traceback(r.stderr)
            errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
            if r.returncode != 0 and len(errors) == 1 and not _traceback(r.stderr):
                out.good += 1
            else:
                shown = " ".join(args)[:40]
                out.notes.append(f"`{shown}` exit {r.returncode}: {r.stderr.strip()[:100]}")
    finally:
        os.chdir(cwd)
    out.leaked = len(h.leftovers())
    h.clean()
    return out


def _deadline_flag(h: Harness, deadline: float) -> list[str]:
    """`--start-deadline` where this tpuctl has it (the boot-time guard)."""
    if not hasattr(h, "_has_deadline"):
        r = h.tpuctl("run", "--help")
        h._has_deadline = "--start-deadline" in r.stdout  # type: ignore[attr-defined]
    return ["--start-deadline", f"{int(deadline)}s"] if h._has_deadline else []  # type: ignore[attr-defined]


SCENARIOS: dict[str, Callable[[Harness, bool], Outcome]] = {
    "faults": lambda h, quick: faults(h, 3 if quick else 100),
    "sigkill": lambda h, quick: sigkill(h, 2 if quick else 50, deadline=20.0 if quick else 60.0),
    "signals": lambda h, quick: signals(h, 3 if quick else 27),
    "input": lambda h, quick: bad_input(h, 12 if quick else None),
    "underneath": lambda h, quick: underneath(h, 1, "15s") if quick else underneath(h, 2),
    "hostkeys": lambda h, quick: hostkeys(h, 3 if quick else None),
    "rewritten": lambda h, quick: chaos_trust.rewritten(h, 1 if quick else 6),
    "squatted": lambda h, quick: chaos_trust.squatted(h, 1 if quick else 6),
    "claims": lambda h, quick: chaos_races.claims(h, Outcome, 1 if quick else 10),
    "lease": lambda h, quick: chaos_races.lease(h, Outcome, 2 if quick else 6, 5 if quick else 90),
    "keep": lambda h, quick: chaos_races.keep_during_gc(h, Outcome, 1 if quick else 5),
    "sweep": lambda h, quick: chaos_races.sweep(h, Outcome, 1 if quick else 5, 4 if quick else 6),
    "faults-compute": lambda h, quick: chaos_compute.faults(h, Outcome, 2 if quick else 24),
    "sigkill-compute": lambda h, quick: chaos_compute.sigkill(
        h, Outcome, 2 if quick else 30, deadline=20.0 if quick else 60.0
    ),
    "signals-compute": lambda h, quick: chaos_compute_signals.signals(
        h, Outcome, 2 if quick else 24
    ),
    "preempt-compute": lambda h, quick: chaos_compute_signals.preempt(
        h, Outcome, 1 if quick else 8
    ),
    "multislice-compute": lambda h, quick: chaos_compute_multislice.multislice(
        h, Outcome, *((1, 1, 1, 20.0, 3) if quick else (9, 9, 4, 60.0, 4))
    ),
}
COMPUTE = [name for name in SCENARIOS if name.endswith("-compute")]
GROUPS = {"compute": COMPUTE, "tpu": [name for name in SCENARIOS if name not in COMPUTE]}


def selected(only: list[str] | None) -> list[str]:
    """The scenarios `--only` names (a group stands for its scenarios), in the harness's
    order, each once; every scenario without `--only`."""
    chosen = {n for o in only or list(SCENARIOS) for n in GROUPS.get(o, [o])}
    return [name for name in SCENARIOS if name in chosen]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few runs of each (seeded)")
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument(
        "--only",
        action="append",
        choices=sorted(SCENARIOS) + sorted(GROUPS),
        help="run this scenario (or group: compute, tpu) only; may be repeated",
    )
    parser.add_argument("--json", action="store_true", help="results as JSON on stdout")
    args = parser.parse_args(argv)
    started = time.monotonic()
    results: list[Outcome] = []
    with (
        tempfile.TemporaryDirectory(prefix="tpuctl-chaos.") as tmp,
        Harness(Path(tmp), args.seed) as h,
    ):
        for name in selected(args.only):
            results.append(SCENARIOS[name](h, args.quick))
            print(f"chaos: {results[-1].row()}", file=sys.stderr, flush=True)
    elapsed = time.monotonic() - started
    if args.json:
        print(json.dumps([o.__dict__ for o in results]))
    else:
        machine = f"{platform.machine()} with {os.cpu_count()} cores"
        print(
            f"`make chaos` on {date.today()}, {machine}, Python {platform.python_version()}, "
            f"seed {args.seed}, {elapsed:.0f} s\n"
        )
        print("| scenario | right | leaked | tracebacks | worst | notes |")
        print("|---|---|---|---|---|---|")
        for o in results:
            print(o.row())
    return 0 if all(o.good == o.runs and not o.leaked and not o.tracebacks for o in results) else 1


if __name__ == "__main__":
    sys.exit(main())
