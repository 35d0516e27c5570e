"""The Python stacks of a running job's processes on this worker (`tpuctl stacks JOB`).

    python3 BUNDLE stacks --job-id J --bucket B --worker K --stamp T [--group PGID]

How a stack is taken:
- The agent runs the script with a `sitecustomize.py` of tpuctl's first on its
  PYTHONPATH (sitehook.py; it then imports the sitecustomize it hides, if any). Every
  Python process of the job that starts with it registers the standard library's
  faulthandler on SIGUSR2, writing all its threads' stacks to `<job folder>/stacks/<pid>.txt`
  (opened for appending, held open by the process).
- `stacks` finds those processes: a pid whose file the process with that pid holds open
  (so a reused pid is never signalled: SIGUSR2 ends a process that has no handler for
  it). Where the VM has py-spy (`py-spy dump --native --pid PID`), its dump is taken
  (Python and native frames); else SIGUSR2 is sent and what each file gets is read
  (Python frames only). Without registered processes, py-spy alone is tried on the
  Python processes of the script's process group (--group), once it is known to be
  the job's: the group's leader is a child of the job's agent, the process holding
  one of its attempts' locks (`agent-A.lock` in the job's folder: agent.py). The client
  takes the group from the job's status, in the shared bucket: a group of any other
  process is left alone, saying so.
- Each frame in the job's own code is followed by its source line, and the code
  folder's path is left out (the same on every worker: the client compares workers).
- The text is printed and written to the bucket (protocol.stacks_path).

Standard library only, Python 3.8+, like every module of the agent (bundle.py).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from .metadata import Token
from .net import HttpError
from .processes import in_group
from .protocol import stacks_path
from .storage import Storage

FRAME = re.compile(r'^(\s*)File "([^"]+)", line (\d+)')
SETTLE = 0.3  # seconds a dump file must stop growing to be whole
PY_SPY_TIMEOUT = 30.0


def _holds(pid: int, path: Path) -> bool:
    """Does process `pid` hold `path` open?"""
    want = os.path.realpath(str(path))
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == want:
                return True
        except OSError:
            continue
    return False


def registered(dumps: Path) -> dict[int, Path]:
    """The job's processes that registered the handler, by pid: their dump files."""
    found = {}
    for name in os.listdir(str(dumps)) if dumps.is_dir() else []:
        m = re.fullmatch(r"(\d+)\.txt", name)
        if m and _holds(int(m.group(1)), dumps / name):
            found[int(m.group(1))] = dumps / name
    return dict(sorted(found.items()))


def job_group(job_dir: Path, group: int) -> str:
    """Why process group `group` is not one the job's agent started here ('' when it is)."""
    leader = in_group(group).get(group)
    if leader is None:
        return f"process group {group} has no leader on this worker"
    parent = int(leader[1])
    locks = [p for p in job_dir.glob("agent-*.lock") if re.fullmatch(r"agent-\d+\.lock", p.name)]
    if not any(_holds(parent, lock) for lock in locks):
        return f"process group {group} was not started by job {job_dir.name}'s agent"
    return ""


def group_pythons(group: int) -> list[int]:
    """The Python processes of process group `group` (py-spy's candidates)."""
    pids = []
    for pid in in_group(group):
        try:
            exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
        except OSError:
            continue
        if exe.startswith("python"):
            pids.append(pid)
    return sorted(pids)


def command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            words = f.read().rstrip(b"\0").split(b"\0")
    except OSError:
        return "?"
    return " ".join(
        os.path.basename(words[0].decode(errors="replace"))
        if i == 0
        else w.decode(errors="replace")
        for i, w in enumerate(words)
    )[:200]


def py_spy(pid: int) -> str | None:
    """py-spy's dump of `pid` (Python and native frames; Python's alone where py-spy
    cannot unwind native ones), or None without py-spy or when it cannot attach (ptrace
    not allowed)."""
    tool = shutil.which("py-spy")
    for native in (["--native"], []) if tool else []:
        try:
            done = subprocess.run(
                [str(tool), "dump", *native, "--pid", str(pid)],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                timeout=PY_SPY_TIMEOUT,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        if done.returncode == 0:
            return done.stdout.decode(errors="replace")
    return None


def faulthandler_dumps(files: dict[int, Path], wait: float) -> dict[int, str]:
    """SIGUSR2 to each registered process, and what its file got (once it stops growing,
    or `wait` seconds have passed)."""
    start = {pid: path.stat().st_size for pid, path in files.items()}
    for pid in files:
        try:
            os.kill(pid, signal.SIGUSR2)
        except OSError:
            start.pop(pid)
    seen = dict(start)
    stable = {pid: time.monotonic() for pid in start}
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        now = time.monotonic()
        for pid in start:
            size = files[pid].stat().st_size
            if size != seen[pid]:
                seen[pid], stable[pid] = size, now
        if all(seen[p] > start[p] and now - stable[p] >= SETTLE for p in start):
            break
        time.sleep(0.05)
    out = {}
    for pid, offset in start.items():
        with open(str(files[pid]), "rb") as f:
            f.seek(offset)
            out[pid] = f.read(seen[pid] - offset).decode(errors="replace")
    return out


def with_sources(text: str, code: Path) -> str:
    """The dump with the code folder's path left out and, after each frame in the job's
    own code, its source line."""
    roots = sorted({str(code), os.path.realpath(str(code))}, key=len, reverse=True)
    lines = []
    for line in text.splitlines():
        m = FRAME.match(line)
        path = m.group(2) if m else ""
        root = next((r for r in roots if path.startswith(r + "/")), None)
        if m is None or root is None:
            lines.append(line)
            continue
        lines.append(line.replace(root + "/", "", 1))
        source = _line(Path(path), int(m.group(3)))
        if source:
            lines.append(f"{m.group(1)}    {source}")
    return "\n".join(lines)


def _line(path: Path, number: int) -> str:
    try:
        with open(str(path), "rb") as f:
            for n, raw in enumerate(f, 1):
                if n == number:
                    return raw.decode(errors="replace").strip()[:200]
    except OSError:
        pass
    return ""


def take(job_dir: Path, group: int | None, wait: float) -> tuple[str, str]:
    """(the stacks of the job's processes on this worker, how they were taken)."""
    files = registered(job_dir / "stacks")
    pids = sorted(set(files) | set(group_pythons(group) if group else []))
    parts, how = [], set()
    late: dict[int, Path] = {}
    for pid in pids:
        dump = py_spy(pid)
        if dump is not None:
            parts.append((pid, dump))
            how.add("py-spy")
        elif pid in files:
            late[pid] = files[pid]
    if late:
        found = faulthandler_dumps(late, wait)
        parts += list(found.items())
        how.add("faulthandler")
        for pid in set(late) - {p for p, d in found.items() if d.strip()}:
            parts.append((pid, "(no stacks came: the process did not answer SIGUSR2)"))
    text = "\n".join(
        f"== process {pid}: {command_line(pid)}\n{with_sources(dump, job_dir / 'code').rstrip()}\n"
        for pid, dump in sorted(parts)
    )
    return text, "+".join(sorted(how))


def take_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """The arguments of a take on this worker (`stacks`, `profile`): the job, its bucket,
    the worker, and the take's folder name (`named` checks the names)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--job-id", required=True)
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--worker", type=int, required=True)
    parser.add_argument("--stamp", required=True, help="the folder name of this take")
    parser.add_argument("--root", default="~/.tpuctl")
    return parser


def named(args: argparse.Namespace) -> bool:
    """Are the take's --stamp and --job-id names (no path in them)?"""
    return bool(re.fullmatch(r"[0-9A-Za-z-]+", args.stamp + args.job_id))


def main(argv: list[str] | None = None) -> int:
    parser = take_parser("stacks", __doc__.split("\n")[0])
    parser.add_argument("--group", type=int, help="the script's process group")
    parser.add_argument("--wait", type=float, default=10.0, help="seconds for the dumps")
    args = parser.parse_args(argv)
    if not named(args):
        print("stacks: invalid --stamp or --job-id", file=sys.stderr)
        return 2
    job_dir = Path(args.root).expanduser() / "jobs" / args.job_id
    group = args.group
    why = job_group(job_dir, group) if group else ""
    if why:  # the job's status in the bucket named it: anyone who may write there may
        print(f"{why}: left alone (the job's status names it)", file=sys.stderr)
        group = None
    text, how = take(job_dir, group, args.wait)
    if not text:
        print(
            "no Python process of the job on this worker can show its stacks (a script "
            "run with python -I or -E, or not Python, has no handler; py-spy is not here)",
            file=sys.stderr,
        )
        return 3
    head = f"# job {args.job_id}, worker {args.worker}, {args.stamp} ({how})\n"
    try:
        storage = Storage(Token(), args.bucket)
        storage.write(
            stacks_path(args.job_id, args.stamp, args.worker), (head + text).encode(), "text/plain"
        )
    except (HttpError, OSError) as e:
        print(f"the stacks were not stored in the bucket: {e}", file=sys.stderr)
    sys.stdout.write(head + text)
    sys.stdout.flush()
    return 0
