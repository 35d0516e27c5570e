"""A profile of a running job's JAX or TensorFlow processes on this worker (`tpuctl profile`).

    python3 BUNDLE profile --job-id J --bucket B --worker K --stamp T --at UNIX --seconds N

How a profile is taken:
- Every Python process of the job that imported jax or tensorflow listens on a FIFO of
  its own, `<job folder>/profile/<pid>.fifo` (sitehook.py: tpuctl's sitecustomize starts
  the listener on the first such import).
- This program writes each listener its ask: the take's name, its start time and length,
  and the folder to trace into, `<job folder>/profile/<stamp>/<pid>/`. A FIFO nobody
  reads (its process ended) is passed over, never waited on.
- Each process traces in-process from `--at` (the client's clock, the same on every
  worker: the workers of a slice start together; a time already past, or too far ahead
  for a clock that is right, starts at once, said on stderr) for `--seconds`, and
  answers beside its FIFO.
- Each trace (`plugins/profile/<run>/<host>.xplane.pb`, as the profiler lays it out) is
  uploaded to the bucket (protocol.profile_path) as `worker-<k>` (`worker-<k>-<pid>`
  when several processes here were traced), removed from the VM, and said on stdout,
  one JSON line each: its name, size and sha256 (the client checks what it downloads
  against these, which reached it over SSH, not through the bucket), the framework and
  when it began.

Standard library only, Python 3.8+, like every module of the agent (bundle.py).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from .metadata import Token
from .net import HttpError
from .processes import alive
from .protocol import NO_PROFILER, profile_path
from .stacks import named, take_parser
from .storage import Storage
from .streams import Transfers

MAX_LEAD = 120.0  # seconds ahead a start time may be before this clock is taken as wrong


def listeners(folder: Path) -> list[int]:
    """The pids whose FIFO is in `folder` (some may have ended)."""
    names = os.listdir(str(folder)) if folder.is_dir() else []
    return sorted(int(m.group(1)) for m in map(re.compile(r"(\d+)\.fifo").fullmatch, names) if m)


def ask(fifo: Path, pid: int, request: dict[str, Any], patience: float = 2.0) -> bool:
    """Write `request` to process `pid`'s FIFO: False when no process reads it (the
    process ended; or, alive, did not open it again within `patience` seconds: its
    listener opens it anew after each ask, and starts a moment after the import)."""
    deadline = time.monotonic() + patience
    while True:
        try:
            fd = os.open(str(fifo), os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as e:
            if e.errno not in (errno.ENXIO, errno.ENOENT):
                raise
            if not alive(pid) or time.monotonic() > deadline:
                return False
            time.sleep(0.05)
    try:
        os.set_blocking(fd, True)
        os.write(fd, json.dumps(request).encode())
    finally:
        os.close(fd)
    return True


def take(folder: Path, stamp: str, at: float, seconds: float, wait: float) -> dict[int, Any]:
    """Each asked process's answer (`{"error": ...}` for one that gave none in time)."""
    asked = []
    for pid in listeners(folder):
        into = folder / stamp / str(pid)
        into.mkdir(parents=True, exist_ok=True)
        request = {"take": stamp, "at": at, "seconds": seconds, "dir": str(into)}
        if ask(folder / f"{pid}.fifo", pid, request):
            asked.append(pid)
    answers: dict[int, Any] = {}
    deadline = max(at, time.time()) + seconds + wait
    while len(answers) < len(asked) and time.time() < deadline:
        for pid in asked:
            path = folder / f"{pid}.{stamp}.json"
            if pid not in answers and path.is_file():
                try:
                    answers[pid] = json.loads(path.read_text())
                except ValueError:
                    answers[pid] = {"error": "its answer is not JSON"}
        time.sleep(0.1)
    for pid in asked:
        answers.setdefault(pid, {"error": f"no trace within {int(seconds + wait)}s"})
    return answers


def trace_of(into: Path) -> Path | None:
    """The trace the profiler wrote in `into` (the newest run's), if any."""
    found = sorted(into.glob("plugins/profile/*/*.xplane.pb"))
    return found[-1] if found else None


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(str(path), "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def start_time(at: float, now: float) -> tuple[float, str]:
    """When to start: `at`, unless this clock says it is past or too far ahead."""
    if at < now - 1.0:
        return now, f"the start time was {now - at:.1f}s past on this worker's clock: started now"
    if at > now + MAX_LEAD:
        return now, f"the start time was {at - now:.0f}s ahead of this worker's clock: started now"
    return max(at, now), ""


def main(argv: list[str] | None = None) -> int:
    parser = take_parser("profile", __doc__.split("\n")[0])
    parser.add_argument("--at", type=float, required=True, help="the start (UNIX time)")
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--wait", type=float, default=120.0, help="seconds to write a trace")
    args = parser.parse_args(argv)
    if not named(args) or args.seconds <= 0:
        print("profile: invalid --stamp, --job-id or --seconds", file=sys.stderr)
        return 2
    folder = Path(args.root).expanduser() / "jobs" / args.job_id / "profile"
    at, note = start_time(args.at, time.time())
    if note:
        print(note, file=sys.stderr)
    answers = take(folder, args.stamp, at, args.seconds, args.wait)
    if not answers:
        print(NO_PROFILER, file=sys.stderr)
        return 3
    traced = {pid: trace_of(folder / args.stamp / str(pid)) for pid in sorted(answers)}
    for pid, answer in sorted(answers.items()):
        if "error" in answer or traced[pid] is None:
            why = answer.get("error") or "the profiler wrote no trace"
            print(f"process {pid}: no profile: {why}", file=sys.stderr)
    done = {pid: path for pid, path in traced.items() if path and "error" not in answers[pid]}
    storage = Storage(Token(), args.bucket)
    for pid, path in done.items():
        name = f"worker-{args.worker}" + (f"-{pid}" if len(done) > 1 else "")
        try:
            Transfers(storage).upload_now(profile_path(args.job_id, args.stamp, name), path)
        except (HttpError, OSError) as e:
            print(f"process {pid}: the trace was not stored in the bucket: {e}", file=sys.stderr)
            continue
        said = {"name": name, "size": path.stat().st_size, "sha256": sha256(path), "pid": pid}
        said.update(framework=answers[pid].get("framework"), began=answers[pid].get("began"))
        print(json.dumps(said), flush=True)
        # in the bucket now: a trace can be large, and the VM's disk is the job's
        shutil.rmtree(str(folder / args.stamp / str(pid)), ignore_errors=True)
    return 0 if done else 1
