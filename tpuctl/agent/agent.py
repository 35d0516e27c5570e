"""tpuctl's agent on a TPU VM worker: fetch the code, run the job, report, tear down.

Standard library only, Python 3.8+: TPU VM images have only the system Python. It never
imports tpuctl; HTTP, the token, identity and Cloud Storage come from its siblings
net.py, metadata.py and storage.py, the job protocol from protocol.py. The runner ships
it inside the agent bundle (bundle.py) and starts it over SSH:

    python3 BUNDLE agent start --job-id J --bucket B --digest D [--worker K] < env.json
    python3 BUNDLE agent run   --job-id J --bucket B --digest D [--worker K] < env.json

(`start` detaches, `run` stays in the foreground.) D is the sha256 of the job's request
(protocol.py): nothing runs unless the request in the bucket matches it; `--teardown`
has worker 0 delete the node at the end.

(BUNDLE: ~/.tpuctl/tpuctl-agent-<sha256[:12]>.pyz.)
A multislice job (docs/multislice.md) adds `--slice S --slices N --coordinator HOST:PORT
--request QR`: K is then the worker's number across the job (S * workers per slice + its
number in its slice), and worker 0 (of slice 0) watches and tears down every slice.
stdin holds the user's env values as a JSON object (never stored in the bucket), and the
job's trust (signing.py: its own key, derived on the laptop, never the client's) under a
name no env variable can have. Cloud
Storage (JSON API), the TPU API and the metadata server are reached at the endpoints in
TPUCTL_STORAGE_URL, TPUCTL_TPU_URL and TPUCTL_METADATA_URL, Google's by default, with
the token of the VM's service account. contributing/runner-internals.md is the protocol.
This module starts and supervises; job.py is the job itself.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, Callable, NoReturn

from . import preflight, protocol, signing, target, tpu_preflight
from .job import VERSION, Job, private_dir
from .metadata import Token, identity
from .net import HttpError
from .protocol import log_path, status_path
from .storage import Storage


def _read_env(stream: Any) -> dict[str, str]:
    if stream is None or stream.isatty():
        return {}
    text = stream.read().strip()
    return {str(k): str(v) for k, v in json.loads(text).items()} if text else {}


def serve(args: argparse.Namespace, user_env: dict[str, str]) -> int:
    job = Job(args, user_env)

    def on_signal(signum: int, _frame: Any) -> None:
        job.stop_reason = job.stop_reason or signal.Signals(signum).name
        job.signalled = True  # the job's loop asks whether it is the preemption notice

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    if not tpu_preflight.ready(job):  # no TPU here: the attempt ended, its status says why
        return 1
    return job.run()


def supervised(args: argparse.Namespace, user_env: dict[str, str], agent_log: Path) -> int:
    """The detached process: a small parent that runs the agent (`serve`) in a child and
    passes signals on to it. When the agent dies with no final status (killed, or an
    error before it could write one, e.g. the metadata server failing in `Job`), the
    parent writes one (LOST when killed by a signal, FAILED with the error otherwise)
    and, on worker 0, tears down as the agent would have."""
    args.supervisor = os.getpid()  # the pid to signal: it passes signals on
    child = os.fork()
    if child == 0:
        _exit_with(lambda: serve(args, user_env))

    def forward(signum: int, _frame: Any) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    _, status = os.waitpid(child, 0)
    if os.WIFSIGNALED(status):
        name = signal.Signals(os.WTERMSIG(status)).name
        state, error, code = protocol.LOST, f"the agent was killed by {name}", 1
    else:
        code = os.WEXITSTATUS(status)
        lines = [ln for ln in agent_log.read_text(errors="replace").splitlines() if ln.strip()]
        state, error = protocol.FAILED, f"the agent failed: {lines[-1].strip() if lines else code}"
    Job(args, {}).after_death(state, error[:500])
    return code


def start(args: argparse.Namespace, user_env: dict[str, str]) -> int:
    """Detach from the SSH session (double fork, own session), print the agent's pid.

    Idempotent for one job and attempt, also while a first start is still in its
    preflight (the runner tries a start again when its answer does not come): every
    start first takes the attempt's start lock (`agent-A.start.lock`), so starts of one
    attempt go one at a time, and the supervisor holds the attempt's agent lock
    (`agent-A.lock`) for its life. A start that finds the agent lock held answers the
    running agent's pid (from `agent-A.pid`, written before the start lock is let go)."""
    job_dir = Path(args.root).expanduser() / "jobs" / args.job_id
    private_dir(job_dir)
    agent_log = job_dir / f"agent-{args.attempt}.log"
    log = str(job_dir / f"attempt-{args.attempt}.log")
    pid_file = job_dir / f"agent-{args.attempt}.pid"
    starting = _lock(job_dir / f"agent-{args.attempt}.start.lock", wait=True)
    running = _lock(job_dir / f"agent-{args.attempt}.lock", wait=False)
    if running is None:  # an agent of this attempt runs: report it
        try:
            pid = int(pid_file.read_text().strip() or 0)
        except (OSError, ValueError):
            pid = 0
        print(
            json.dumps(
                {"pid": pid, "log": log, "agent_log": str(agent_log), "already_started": True}
            ),
            flush=True,
        )
        return 0 if pid else 1
    problem = _preflight(args, Path(log))
    if problem is not None:  # the job ends here: the runner says why and tears down
        print(
            json.dumps(
                {
                    "pid": 0,
                    "log": log,
                    "agent_log": str(agent_log),
                    "error": problem.message,
                    "fix": problem.fix,
                    "permission": problem.permission,
                }
            ),
            flush=True,
        )
        return 0
    read_end, write_end = os.pipe()
    if os.fork():
        os.close(write_end)
        os.close(running)  # the supervisor holds it now
        pid = int(os.read(read_end, 64) or b"0")
        if pid:
            pid_file.write_text(str(pid))
        print(json.dumps({"pid": pid, "log": log, "agent_log": str(agent_log)}), flush=True)
        return 0 if pid else 1  # (the start lock goes with this process)
    os.close(read_end)
    if starting is not None:  # (it is: the start waited for it)
        os.close(starting)  # held by the start until it has answered, not by the agent
    os.setsid()
    child = os.fork()
    if child:
        os.write(write_end, str(child).encode())
        os._exit(0)
    os.close(write_end)

    def detached() -> int:  # the SSH session may close now: nothing of it stays open here
        with open(os.devnull, "rb") as null, open(str(agent_log), "ab") as log_file:
            os.dup2(null.fileno(), 0)
            os.dup2(log_file.fileno(), 1)
            os.dup2(log_file.fileno(), 2)
        return supervised(args, user_env, agent_log)  # `running` stays open: the lock

    _exit_with(detached)


def _lock(path: Path, wait: bool) -> int | None:
    """An exclusive lock on `path` (flock: let go when every descriptor of it is closed,
    so also when its holder dies): its descriptor, or None when another holds it and
    `wait` is False. The descriptor is not inherited across exec (the script never holds
    it), but it is across fork."""
    fd = os.open(str(path), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _preflight(args: argparse.Namespace, log: Path) -> Any:
    """Can this VM's service account do what the job needs (preflight.py)? The Problem
    if not, said in the attempt's log and, where the bucket takes it, a FAILED status."""
    storage = Storage(Token(), args.bucket)
    me = identity()
    worker = me["worker"] if args.worker is None else args.worker

    def say(text: str) -> None:
        with log.open("a") as f:
            f.write(f"tpuctl-agent: {text}\n")

    try:
        node = target.of(storage.token, me, args.target)
        problem = preflight.check(
            storage, me, args.job_id, worker, args.slices > 1, say, node, teardown=args.teardown
        )
    except HttpError as e:  # not a refusal: the job meets it again, and reports it then
        say(f"preflight: could not finish ({e}); starting anyway")
        return None
    if problem is None:
        return None
    say(f"error: {problem.message}; fix: {problem.fix}")
    with contextlib.suppress(HttpError, OSError):
        storage.write_json(
            status_path(args.job_id, worker),
            {
                "worker": worker,
                "attempt": args.attempt,
                "state": protocol.FAILED,
                "exit_status": None,
                "started": round(time.time(), 3),
                "ended": round(time.time(), 3),
                "message": f"{problem.message}; fix: {problem.fix}"[:500],
                "log": log_path(args.job_id, args.attempt, worker),
                "agent_version": VERSION,
            },
        )
    return problem


def _exit_with(fn: Callable[[], int]) -> NoReturn:
    """End a forked process with `fn()`'s code (1 on an error, its traceback printed)."""
    code = 1
    try:
        code = fn()
    except BaseException:  # noqa: BLE001 - the agent's log is all there is now
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agent", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["start", "run"])
    parser.add_argument("--job-id", required=True)
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--worker", type=int, help="default: the metadata server's")
    parser.add_argument("--attempt", type=int, default=1)
    # What the user submitted, by a path the bucket cannot change (protocol.py): the
    # sha256 of the job's request, and whether worker 0 deletes the node at the end.
    parser.add_argument("--digest", default="", help="the sha256 of the job's request")
    parser.add_argument("--teardown", action="store_true", help="worker 0 deletes the node")
    parser.add_argument("--root", default="~/.tpuctl", help="where jobs live on the VM")
    parser.add_argument("--heartbeat", type=float, default=5.0, help="seconds between reports")
    parser.add_argument("--sync-every", type=float, default=30.0, help="seconds between syncs")
    parser.add_argument("--grace", type=float, default=30.0, help="from SIGTERM to SIGKILL")
    parser.add_argument(
        "--notice-budget",
        type=float,
        default=20.0,
        help="after a "
        "preemption notice, how long (seconds) the script may run before "
        "the last output sync (the VM has about 30 s)",
    )
    parser.add_argument(
        "--stale",
        type=float,
        default=300.0,
        help="a worker whose heartbeat is silent this long (seconds) is lost",
    )
    parser.add_argument(
        "--start-wait",
        type=float,
        default=0.0,
        help="worker 0: a peer with no status of this attempt yet is lost after this "
        "long (seconds) while the client renews its lease (it is still starting the "
        "agents); else, and with 0, after --stale",
    )
    parser.add_argument(
        "--refresh-every",
        type=float,
        default=6 * 3600.0,
        help="seconds "
        "between rewrites of the job record and checks that the outputs "
        "are still in the bucket (Job.refresh)",
    )
    parser.add_argument(
        "--hang-after",
        type=float,
        default=600.0,
        help="no output and idle chips this long (seconds) is said to be a hang (hang.py); 0: off",
    )
    # A multislice job (docs/multislice.md): this worker's slice, how many there are, the
    # MEGASCALE coordinator (worker 0 of slice 0, HOST:PORT), and the queued resource
    # worker 0 deletes at the end.
    parser.add_argument("--slice", type=int, default=0)
    parser.add_argument("--slices", type=int, default=1)
    parser.add_argument("--coordinator", default="")
    parser.add_argument("--request", default="")
    target.add_arguments(parser)  # --target KIND:NAME
    args = parser.parse_args(argv)
    user_env = _read_env(sys.stdin)
    # the job's trust (signing.py): the agent's alone, never the script's; no other name
    # that no env variable can have reaches the script either
    args.trust = signing.Trust.of(user_env.pop(protocol.TRUST, ""))
    user_env = {k: v for k, v in user_env.items() if not k.startswith("=")}
    return (start if args.command == "start" else serve)(args, user_env)
