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
            traceback or an `unexpected` error.

`--quick` runs a few of each (seeded), as `tests/test_chaos.py` does inside `make test`.
"""

from __future__ import annotations

import argparse
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
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tpuctl.emulator.control import EmulatorControl  # noqa: E402
from tpuctl.emulator.ports import free_port  # noqa: E402

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

    def leftovers(self) -> list[str]:
        names = [str(n["name"]).rsplit("/", 1)[-1] for n in self.control.call("GET", "nodes")]
        names += [str(q["name"]).rsplit("/", 1)[-1] for q in self.control.call("GET", "queued")]
        return names

    def clean(self) -> None:
        """Delete whatever a scenario left, so the next starts from nothing."""
        self.control.faults()
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

    def wait_gone(self, timeout: float) -> float | None:
        """Seconds until no node or request is left, or None if some still are."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if not self.leftovers():
                return time.monotonic() - start
            time.sleep(0.5)
        return None


def _traceback(text: str) -> bool:
    return "Traceback (most recent call last)" in text or "error: unexpected " in text


# -- scenarios -----------------------------------------------------------------------
def faults(h: Harness, runs: int) -> Outcome:
    out = Outcome("run under 30% API faults")
    h.reset(instant=True)
    h.control.faults(
        rate=0.3, codes=[429, 500, 503, 504], after_rate=0.5, seed=h.random.randrange(1 << 30)
    )
    for i in range(runs):
        code = (0, 1, 3)[i % 3]
        r = h.tpuctl("run", str(h.script), "--zone", ZONE, "--", "0", str(code))
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


def sigkill(h: Harness, runs: int, deadline: float) -> Outcome:
    out = Outcome("SIGKILL of run at a random moment")
    out.notes.append("worst: seconds from the kill until no node was left")
    h.reset(instant=False)
    for _ in range(runs):
        proc = h.spawn("run", str(h.script), "--zone", ZONE, *_deadline_flag(h, deadline),
                       "--", "2", "0")  # fmt: skip
        time.sleep(h.random.uniform(0.3, 6.0))
        proc.kill()
        proc.communicate()
        out.runs += 1
        # the job lasts 2 s; the start deadline bounds a node whose agents never started
        gone = h.wait_gone(timeout=deadline + 60 + 2)
        if gone is None:
            out.leaked += 1
            out.notes.append("a node outlived the start deadline by a minute")
            h.clean()
        else:
            out.good += 1
            out.worst = max(out.worst, gone)
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
        time.sleep(h.random.uniform(0.2, 4.0))
        proc.send_signal(sig)
        try:
            _, err = proc.communicate(timeout=150)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            out.notes.append(f"{kind} ignored {sig.name} for 150 s")
        out.runs += 1
        out.tracebacks += _traceback(err)
        left = h.leftovers()
        name = args[1]
        if kind != "run" and left and set(left) == {name}:
            # A create that finished before the signal, or that was interrupted once its
            # node existed, leaves the user's node (and its request): fine when it said so.
            left = [] if (proc.returncode == 0 or name in err) else left
        if left:
            out.leaked += 1
            out.notes.append(f"{kind} after {sig.name}: left {', '.join(left)}")
        elif not _traceback(err):
            out.good += 1
        h.clean()
        h.wait_gone(timeout=60)
    return out


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
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few runs of each (seeded)")
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument("--only", action="append", choices=sorted(SCENARIOS))
    parser.add_argument("--json", action="store_true", help="results as JSON on stdout")
    args = parser.parse_args(argv)
    started = time.monotonic()
    results: list[Outcome] = []
    with (
        tempfile.TemporaryDirectory(prefix="tpuctl-chaos.") as tmp,
        Harness(Path(tmp), args.seed) as h,
    ):
        for name in args.only or list(SCENARIOS):
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
