"""tpuctl's agent on a TPU VM worker: fetch the code, run the job, report, tear down.

Standard library only, Python 3.8+: TPU VM images have only the system Python. It never
imports tpuctl; HTTP, the token, identity and Cloud Storage come from its sibling
common.py. The runner ships it inside the agent bundle (bundle.py) and starts it over SSH:

    python3 BUNDLE agent start --job-id J --bucket B [--worker K] < env.json   # detaches
    python3 BUNDLE agent run   --job-id J --bucket B [--worker K] < env.json   # foreground

(BUNDLE: ~/.tpuctl/tpuctl-agent-<sha256[:12]>.pyz.)
A multislice job (docs/multislice.md) adds `--slice S --slices N --coordinator HOST:PORT
--request QR`: K is then the worker's number across the job (S * workers per slice + its
number in its slice), and worker 0 (of slice 0) watches and tears down every slice.
stdin holds the user's env values as a JSON object (never stored in the bucket). Cloud
Storage (JSON API), the TPU API and the metadata server are reached at the endpoints in
TPUCTL_STORAGE_URL, TPUCTL_TPU_URL and TPUCTL_METADATA_URL, Google's by default, with
the token of the VM's service account. docs/runner-internals.md is the protocol.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, NoReturn

from . import preflight
from .common import (
    FINAL,
    METADATA_URL,
    Beats,
    HttpError,
    Json,
    Storage,
    Token,
    alive,
    http,
    identity,
    tpu,
)
from .transfer import (
    LogUploader,
    OutputSync,
    StatusWriter,
    delete_node,
    fetch_code,
    job_path,
    log_path,
    status_path,
)

VERSION = 1


class Job:
    """One attempt of a job on this worker: what `run` does."""

    def __init__(self, args: argparse.Namespace, user_env: dict[str, str]) -> None:
        self.args, self.user_env, self.stop_reason = args, user_env, ""
        self.dir = Path(args.root).expanduser() / "jobs" / args.job_id
        self.code, self.outputs = self.dir / "code", self.dir / "outputs"
        self.record_copy = self.dir / "job.json"  # the record as fetched (see `refresh`)
        self.local_log = self.dir / f"attempt-{args.attempt}.log"
        self.storage = Storage(Token(), args.bucket)
        self.me = identity()
        self.worker = self.me["worker"] if args.worker is None else args.worker
        # Every slice has the workers of this one: the job's are all the slices' together.
        self.total = self.me["workers"] * args.slices
        self.status = StatusWriter(self.storage, status_path(args.job_id, self.worker), {
            "worker": self.worker, "attempt": args.attempt,
            "pid": getattr(args, "supervisor", None) or os.getpid(), "agent_pid": os.getpid(),
            "started": round(time.time(), 3), "state": "STARTING", "exit_status": None,
            "log": log_path(args.job_id, args.attempt, self.worker), "agent_version": VERSION,
        })  # fmt: skip
        self.log = LogUploader(
            self.storage, self.local_log, self.status.value["log"], args.heartbeat
        )
        # Each slice syncs (and restores) outputs of its own: two slices' worker 0 never
        # overwrite each other's files.
        outputs = ("outputs", f"slice-{args.slice}", "") if args.slices > 1 else ("outputs", "")
        self.sync = OutputSync(self.storage, self.outputs, job_path(args.job_id, *outputs))
        self.peers = Beats(args.stale)  # worker 0: are the other workers' agents alive?
        self.noticed_at: float | None = None  # when the preemption notice came
        self.signalled = False  # SIGTERM/SIGINT/SIGHUP came: is it the notice?

    @property
    def cancelled(self) -> bool:
        return bool(self.stop_reason or self.status.cancel_requested)

    # -- the preemption notice ---------------------------------------------------------
    # A preempted spot or preemptible VM gets about 30 s: the metadata server's
    # `instance/preempted` turns TRUE and the guest shuts down (SIGTERM to every process).
    # The agent passes SIGTERM on to the script (which may checkpoint into
    # TPUCTL_OUTPUT_DIR), waits for it at most --notice-budget seconds, syncs the outputs
    # a last time, and reports PREEMPTED; the runner then recreates the node.
    def preempted(self, wait_etag: str | None = None) -> tuple[bool, str]:
        """(`instance/preempted` is TRUE, its ETag); with `wait_etag`, held until the value
        differs from that ETag (or a minute passes), as Google's guest agents watch it."""
        url = f"{METADATA_URL}/instance/preempted"
        if wait_etag is not None:
            url += f"?wait_for_change=true&timeout_sec=60&last_etag={wait_etag}"
        _, head, body = http("GET", url, headers={"Metadata-Flavor": "Google"},
                             attempts=2, timeout=75)  # fmt: skip
        return body.decode().strip().upper() == "TRUE", head.get("etag", "")

    def notice(self, how: str) -> None:
        if self.noticed_at is not None:
            return
        self.noticed_at = time.monotonic()
        self.stop_reason = "preemption notice"
        self.status.value["message"] = f"preempted ({how})"
        self.say(f"preemption notice ({how}): passing SIGTERM to the job; it may save its "
                 f"state into TPUCTL_OUTPUT_DIR, outputs are synced a last time")  # fmt: skip

    def watch_preemption(self, stop: threading.Event) -> None:
        """A thread: the notice as soon as the metadata server gives it."""
        etag = "NONE"
        while not stop.is_set():
            try:
                now, etag = self.preempted(etag)
            except HttpError:  # not served here, or a hiccup: look again later
                if stop.wait(10):
                    return
                continue
            if now:
                self.notice("instance/preempted is TRUE")
                return

    def check_signal(self) -> None:
        """After a shutdown signal: the notice, if the VM is being preempted."""
        self.signalled = False
        if self.noticed_at is not None:
            return
        with contextlib.suppress(HttpError):
            if self.preempted()[0]:
                self.notice("the VM is shutting down")

    def say(self, text: str) -> None:
        """A line of the agent's own in the job's log."""
        with open(str(self.local_log), "ab") as f:
            f.write(f"tpuctl-agent: {text}\n".encode())

    def quietly(self, fn: Callable[[], Any]) -> None:
        """Reporting must not kill the job: a failure is logged, the next round retries."""
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            self.say(f"could not report: {e!r}")

    def env(self, record: Json) -> dict[str, str]:
        env = dict(os.environ, PYTHONUNBUFFERED="1")  # so the log follows the script live
        env.update(self.megascale())  # before the user's: an --env value wins
        for name in record.get("env") or []:
            if name in self.user_env:
                env[name] = self.user_env[name]
            else:
                self.say(f"no value was given for the env variable {name}")
        # On a multislice job the worker id and count are the slice's (as the metadata
        # server has them); TPUCTL_SLICE_ID tells the slices apart.
        worker = self.me["worker"] if self.args.slices > 1 else self.worker
        env.update(
            TPUCTL_JOB_ID=self.args.job_id, TPUCTL_WORKER_ID=str(worker),
            TPUCTL_NUM_WORKERS=str(self.me["workers"]), TPUCTL_OUTPUT_DIR=str(self.outputs),
            TPUCTL_ATTEMPT=str(self.args.attempt), TPUCTL_RESTART=str(self.args.attempt - 1),
            TPUCTL_SLICE_ID=str(self.args.slice), TPUCTL_NUM_SLICES=str(self.args.slices),
        )  # fmt: skip
        return env

    def megascale(self) -> dict[str, str]:
        """What JAX/libtpu read to join the slices of a multislice job over the data-
        center network, as Google's multislice tooling sets them (docs/multislice.md):
        the coordinator (worker 0 of slice 0, HOST:PORT), its port, how many slices and
        which this one is. Nothing on a single slice."""
        if self.args.slices <= 1 or not self.args.coordinator:
            return {}
        return {
            "MEGASCALE_COORDINATOR_ADDRESS": self.args.coordinator,
            "MEGASCALE_PORT": self.args.coordinator.rsplit(":", 1)[-1],
            "MEGASCALE_NUM_SLICES": str(self.args.slices),
            "MEGASCALE_SLICE_ID": str(self.args.slice),
        }

    def supervise(self, command: list[str], env: dict[str, str], phase: str) -> int:
        """Run one command to its end, heartbeating; on a cancel SIGTERM, then SIGKILL."""
        with open(str(self.local_log), "ab") as log:
            proc = subprocess.Popen(command, cwd=str(self.code), env=env, stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)  # fmt: skip
        self.quietly(lambda: self.status.write(state="RUNNING", phase=phase, child_pid=proc.pid))
        beat = synced = refreshed = time.monotonic()
        term_at: float | None = None
        while True:
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = proc.wait(timeout=0.1)
                return 128 - code if code < 0 else code  # killed by signal N: 128 + N
            now = time.monotonic()
            if self.signalled:
                self.check_signal()
            if self.noticed_at is not None and now - self.noticed_at > self.args.notice_budget:
                self.say(f"the {phase} still runs {self.args.notice_budget:g}s after the "
                         "preemption notice: syncing the outputs now")  # fmt: skip
                return 128 + signal.SIGTERM
            if self.cancelled and term_at is None:
                self.say(f"cancelled ({self.stop_reason or 'on request'}): stopping the {phase}")
                _kill(proc.pid, signal.SIGTERM)
                term_at = now
            elif term_at is not None and now - term_at > self.args.grace:
                _kill(proc.pid, signal.SIGKILL)
            if now - beat >= self.args.heartbeat:  # (the status: the heartbeat thread)
                beat = now
                self.quietly(self.log.upload)
            if now - synced >= self.args.sync_every:
                synced = now
                self.quietly(self.sync.sync)
            if now - refreshed >= self.args.refresh_every:
                refreshed = now
                self.quietly(self.refresh)

    # -- the retention rule --------------------------------------------------------------
    # `tpuctl init` offers a lifecycle rule deleting what is under tpuctl/jobs/ once N
    # days old, and Cloud Storage counts an object's age from its creation
    # (https://cloud.google.com/storage/docs/lifecycle#age): a job running longer than N
    # days would lose what it wrote once. Its record, which the teardown and a restart
    # after a preemption read, and the outputs it never rewrote, which a restart restores.
    # So every --refresh-every seconds (6 h; the shortest retention is a day) worker 0
    # writes the record again (a new generation is a new object: its age starts over),
    # from the copy kept at the start if a rule took it already, and every worker uploads
    # again the outputs of its own that the bucket no longer has.
    def refresh(self) -> None:
        if self.worker == 0:
            name = job_path(self.args.job_id, "job.json")
            record, generation = self.storage.read_json(name)
            if record is None:
                record = json.loads(self.record_copy.read_text())
                self.say("the job record was gone from the bucket (a lifecycle rule?): "
                         "written again from the copy fetched at the start")  # fmt: skip
            try:
                self.storage.write_json(name, record, if_generation_match=generation)
            except HttpError as e:
                if e.status != 412:  # 412: written meanwhile, so new already
                    raise
        gone = self.sync.recheck()
        if gone:
            self.say(f"{gone} output file(s) were gone from the bucket: uploading them again")
            self.sync.sync()

    def heartbeat(self, stop: threading.Event) -> None:
        """Every --heartbeat seconds, whatever the job does (fetching, running, syncing
        the outputs): the status rewritten, and on worker 0 its peers looked at."""
        while not stop.wait(self.args.heartbeat):
            self.quietly(self.status.write)
            if self.worker == 0 and self.total > 1:
                self.quietly(self.watch_peers)

    def watch_peers(self) -> None:
        """Worker 0: a peer whose agent stopped beating for --stale seconds is LOST; the
        job then ends (the others are asked to stop, and worker 0 tears down)."""
        current = {}
        for k in range(1, self.total):
            st = self.storage.read_json(status_path(self.args.job_id, k))[0]
            if st and st.get("attempt") == self.args.attempt:
                current[k] = st
        lost = self.peers.lost(current, range(1, self.total))
        if not lost or self.cancelled:
            return
        silent = int(self.peers.silent_for(lost[0]))
        why = f"worker {lost[0]} lost: no heartbeat for {silent}s"
        for k in lost:
            self.storage.update_json(
                status_path(self.args.job_id, k),
                lambda v, k=k: dict(v, worker=k, attempt=self.args.attempt, state="LOST",
                                    message=f"no heartbeat for {silent}s", ended=time.time()),
            )  # fmt: skip
        for k in set(range(1, self.total)) - set(lost):
            self.storage.update_json(
                status_path(self.args.job_id, k), lambda v: dict(v, cancel=True)
            )
        self.status.value["message"] = why
        self.stop_reason = why

    def run(self) -> int:
        self.outputs.mkdir(parents=True, exist_ok=True)
        self.code.mkdir(parents=True, exist_ok=True)
        self.quietly(lambda: self.status.write(state="FETCHING"))
        stop = threading.Event()
        for work in (self.heartbeat, self.watch_preemption):
            threading.Thread(target=work, args=(stop,), daemon=True).start()
        try:
            return self._run()
        finally:
            stop.set()

    def _run(self) -> int:
        code, state, record = 1, "FAILED", {}
        try:
            record = fetch_code(self.storage, self.args.job_id, self.code)
            self.record_copy.write_text(json.dumps(record))
            self.sync.restore()
            env = self.env(record)
            script = record["script"]
            command = [sys.executable, script] if script.endswith(".py") else [f"./{script}"]
            code = 0
            if record.get("setup") and not self.cancelled:
                self.say(f"setup: {record['setup']}")
                shell = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
                code = self.supervise([shell, "-c", record["setup"]], env, "setup")
                if code:
                    self.say(f"the setup failed with exit status {code}")
            if code == 0 and not self.cancelled:
                code = self.supervise(command + list(record.get("args") or []), env, "script")
            if self.signalled:
                self.check_signal()
            state = "CANCELLED" if self.cancelled else ("SUCCEEDED" if code == 0 else "FAILED")
            if self.noticed_at is not None:
                state = "PREEMPTED"
            self.say(f"{state.lower()} with exit status {code}")
        except Exception as e:  # noqa: BLE001 - reported in the log and the status
            self.say(f"error: {e!r}")
            self.status.value["message"] = repr(e)[:500]
        self.quietly(self.sync.sync)  # first: what a preempted job resumes from
        self.quietly(lambda: self.log.upload(force=True))
        self.quietly(lambda: self.status.write(state=state, exit_status=code, ended=time.time()))
        if self.worker == 0 and record.get("teardown"):
            if state == "PREEMPTED":  # the runner recreates it, or gc deletes it
                self.say("teardown left to the runner: the node is being preempted")
            else:
                self.teardown()
        return code

    def after_death(self, state: str, error: str) -> None:
        """The supervisor's part once the agent died: a final status with the error
        (unless the agent wrote one), then, on worker 0, the teardown it still owed."""
        current, _ = self.storage.read_json(self.status.name)
        record = self.storage.read_json(job_path(self.args.job_id, "job.json"))[0]
        if record is None and self.record_copy.is_file():  # a lifecycle rule took it
            record = json.loads(self.record_copy.read_text())
        owes_teardown = self.worker == 0 and (record or {}).get("teardown")
        current = current or {}
        if current.get("attempt") == self.args.attempt and current.get("state") in FINAL:
            if not owes_teardown or "teardown" in current:
                return
            self.status.value = dict(current)
        else:
            self.say(f"error: {error}")
            self.status.value.update(state=state, message=error, ended=time.time(),
                                     exit_status=None if state == "LOST" else 1)  # fmt: skip
            self.quietly(self.status.write)
            self.quietly(lambda: self.log.upload(force=True))
        if owes_teardown:
            self.teardown()

    def ended(self, worker: int, since: float) -> bool:
        """Has `worker` ended this attempt, or stopped answering for --stale seconds?"""
        try:
            st = self.storage.read_json(status_path(self.args.job_id, worker))[0]
        except HttpError:
            return False
        if not st or st.get("attempt") != self.args.attempt:
            return time.time() - since > self.args.stale  # its agent never started
        return st.get("state") in FINAL or time.time() - st.get("heartbeat", 0) > self.args.stale

    def teardown(self) -> None:
        """On worker 0: once every worker has ended, delete the node (this VM included);
        on a multislice job, its queued resource, which takes every slice with it."""
        since = time.time()
        while not all(self.ended(k, since) for k in range(self.total)):
            time.sleep(self.args.heartbeat)
        project, zone, node = self.me["project"], self.me["zone"], self.me["node"]
        request = self.args.request if self.args.slices > 1 else None
        what = f"queued resource {request} (every slice)" if request else f"node {node}"
        self.say(f"teardown: deleting {what} in {zone}")
        self.quietly(lambda: self.log.upload(force=True))  # before this VM goes away
        try:
            if request:
                op = delete_request(self.storage.token, project, zone, request)
            else:
                op = delete_node(self.storage.token, project, zone, node)
            outcome = (op or {}).get("name", "already gone")
        except Exception as e:  # noqa: BLE001 - said in the log and the status
            outcome = f"failed: {e!r}"
            self.say(f"teardown {outcome}")
        self.quietly(lambda: self.status.write(teardown=outcome))
        self.quietly(lambda: self.log.upload(force=True))


def delete_request(token: Token, project: str, zone: str, request: str) -> Json | None:
    """Ask the TPU API to delete a queued resource with force (its nodes go with it): its
    operation, or None when it is gone."""
    path = f"projects/{project}/locations/{zone}/queuedResources/{request}?force=true"
    try:
        return dict(json.loads(tpu(token, "DELETE", path) or b"{}"))
    except HttpError as e:
        if e.status == 404:
            return None
        raise


def _kill(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)  # the child leads its own process group: its children go too


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
        state, error, code = "LOST", f"the agent was killed by {name}", 1
    else:
        code = os.WEXITSTATUS(status)
        lines = [ln for ln in agent_log.read_text(errors="replace").splitlines() if ln.strip()]
        state, error = "FAILED", f"the agent failed: {lines[-1].strip() if lines else code}"
    Job(args, {}).after_death(state, error[:500])
    return code


def start(args: argparse.Namespace, user_env: dict[str, str]) -> int:
    """Detach from the SSH session (double fork, own session), print the agent's pid."""
    job_dir = Path(args.root).expanduser() / "jobs" / args.job_id
    job_dir.mkdir(parents=True, exist_ok=True)
    agent_log = job_dir / f"agent-{args.attempt}.log"
    log = str(job_dir / f"attempt-{args.attempt}.log")
    pid_file = job_dir / f"agent-{args.attempt}.pid"
    try:  # idempotent: a second start of the same attempt reports the running agent
        running = int(pid_file.read_text().strip() or 0)
    except (OSError, ValueError):
        running = 0
    if running and alive(running):
        print(json.dumps({"pid": running, "log": log, "agent_log": str(agent_log)}), flush=True)
        return 0
    problem = _preflight(args, Path(log))
    if problem is not None:  # the job ends here: the runner says why and tears down
        print(json.dumps({"pid": 0, "log": log, "agent_log": str(agent_log),
                          "error": problem.message, "fix": problem.fix,
                          "permission": problem.permission}), flush=True)  # fmt: skip
        return 0
    read_end, write_end = os.pipe()
    if os.fork():
        os.close(write_end)
        pid = int(os.read(read_end, 64) or b"0")
        if pid:
            pid_file.write_text(str(pid))
        print(json.dumps({"pid": pid, "log": log, "agent_log": str(agent_log)}), flush=True)
        return 0 if pid else 1
    os.close(read_end)
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
        return supervised(args, user_env, agent_log)

    _exit_with(detached)


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
        problem = preflight.check(storage, me, args.job_id, worker, args.slices > 1, say)
    except HttpError as e:  # not a refusal: the job meets it again, and reports it then
        say(f"preflight: could not finish ({e}); starting anyway")
        return None
    if problem is None:
        return None
    say(f"error: {problem.message}; fix: {problem.fix}")
    with contextlib.suppress(HttpError, OSError):
        storage.write_json(status_path(args.job_id, worker), {
            "worker": worker, "attempt": args.attempt, "state": "FAILED", "exit_status": None,
            "started": round(time.time(), 3), "ended": round(time.time(), 3),
            "message": f"{problem.message}; fix: {problem.fix}"[:500],
            "log": log_path(args.job_id, args.attempt, worker), "agent_version": VERSION,
        })  # fmt: skip
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
    parser.add_argument("--root", default="~/.tpuctl", help="where jobs live on the VM")
    parser.add_argument("--heartbeat", type=float, default=5.0, help="seconds between reports")
    parser.add_argument("--sync-every", type=float, default=30.0, help="seconds between syncs")
    parser.add_argument("--grace", type=float, default=30.0, help="from SIGTERM to SIGKILL")
    parser.add_argument("--notice-budget", type=float, default=20.0, help="after a "
                        "preemption notice, how long (seconds) the script may run before "
                        "the last output sync (the VM has about 30 s)")  # fmt: skip
    parser.add_argument("--stale", type=float, default=300.0, help="a worker whose "
                        "heartbeat is silent this long (seconds) is lost")  # fmt: skip
    parser.add_argument("--refresh-every", type=float, default=6 * 3600.0, help="seconds "
                        "between rewrites of the job record and checks that the outputs "
                        "are still in the bucket (Job.refresh)")  # fmt: skip
    # A multislice job (docs/multislice.md): this worker's slice, how many there are, the
    # MEGASCALE coordinator (worker 0 of slice 0, HOST:PORT), and the queued resource
    # worker 0 deletes at the end.
    parser.add_argument("--slice", type=int, default=0)
    parser.add_argument("--slices", type=int, default=1)
    parser.add_argument("--coordinator", default="")
    parser.add_argument("--request", default="")
    args = parser.parse_args(argv)
    user_env = _read_env(sys.stdin)
    return (start if args.command == "start" else serve)(args, user_env)
