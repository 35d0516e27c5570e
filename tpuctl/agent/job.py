"""One attempt of a job on a TPU VM worker (`Job`): fetch the code (refusing a request or
a file that is not the one submitted, protocol.py), run the setup and the script under
supervision, heartbeat, sync outputs, keep the job's request and record against the
bucket's lifecycle rule (retention.py), watch the peers and the preemption notice,
report, tear down (teardown.py).
agent.py starts it (detached, under a supervisor) and is the protocol's description.

Standard library only, Python 3.8+.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import threading
import time
from functools import partial
from pathlib import Path
from typing import Any, Callable

from . import chips, claims, envs, hang, maintenance, protocol, sitehook, target, tpu_health
from .container import PullFailed
from .launch import run as launch
from .metadata import Token, identity
from .net import HttpError, Json
from .outputs import Outputs
from .protocol import Beats, Refused, job_path, log_path, status_path
from .retention import Kept
from .signing import Trust
from .storage import Storage
from .teardown import Teardown
from .transfer import LogUploader, OutputSync, StatusWriter, fetch_code

VERSION = 1


class Job(Teardown):
    """One attempt of a job on this worker: what `run` does."""

    def __init__(self, args: argparse.Namespace, user_env: dict[str, str]) -> None:
        self.args, self.user_env, self.stop_reason = args, user_env, ""
        self.dir = Path(args.root).expanduser() / "jobs" / args.job_id
        self.code, self.outputs = self.dir / "code", self.dir / "outputs"
        self.local_log = self.dir / f"attempt-{args.attempt}.log"
        self.storage = Storage(Token(), args.bucket)
        self.kept = Kept(self.storage, args.job_id, self.dir, self.say)  # see `refresh`
        self.me = identity()
        self.me["node"] = args.target.name  # the client's name for it (target.py)
        self.node = target.of(self.storage.token, self.me, args.target)
        self.worker = self.me["worker"] if args.worker is None else args.worker
        # Every slice has the workers of this one: the job's are all the slices' together.
        self.total = self.me["workers"] * args.slices
        self.status = StatusWriter(
            self.storage,
            status_path(args.job_id, self.worker),
            {
                "worker": self.worker,
                "attempt": args.attempt,
                "pid": getattr(args, "supervisor", None) or os.getpid(),
                "agent_pid": os.getpid(),
                "started": round(time.time(), 3),
                "state": protocol.STARTING,
                "exit_status": None,
                "log": log_path(args.job_id, args.attempt, self.worker),
                "agent_version": VERSION,
            },
        )
        self.log = LogUploader(
            self.storage, self.local_log, self.status.value["log"], args.heartbeat
        )
        # Each slice syncs (and restores) outputs of its own: two slices' worker 0 never
        # overwrite each other's files.
        outputs = ("outputs", f"slice-{args.slice}", "") if args.slices > 1 else ("outputs", "")
        # What a later attempt may restore: the signed manifests of what was synced.
        self.manifests = Outputs(
            self.storage,
            args.job_id,
            args.slice,
            self.worker,
            args.attempt,
            getattr(args, "trust", Trust()).job_key,
            self.say,
        )
        self.sync = OutputSync(
            self.storage,
            self.outputs,
            job_path(args.job_id, *outputs),
            on_synced=self.manifests.write,
        )
        self.peers = Beats(args.stale)  # worker 0: are the other workers' agents alive?
        self.client = claims.Renewals(self.storage, args.job_id)  # still starting them?
        self.noticed_at: float | None = None  # when the preemption notice came
        self.signalled = False  # SIGTERM/SIGINT/SIGHUP came: is it the notice?
        self.passing: threading.Thread | None = None  # the notice passed on to the peers
        self.ran = False  # has the setup or the script started?
        self.hang = hang.Watch.of(self)  # no output, CPU or chip work: said once (hang.py)
        self.chips = chips.Chips.of(self)  # HBM and duty cycle of each chip, live (chips.py)

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
        value, etag = maintenance.instance_value("preempted", wait_etag)
        return value == "TRUE", etag

    def notice(self, how: str, passed: bool = False, reason: str = "preemption") -> None:
        """The attempt ends on a preemption notice: this VM's own, or (`passed`) one a
        peer's VM got, passed on to this worker (protocol.with_notice); `reason`
        "maintenance" for a host maintenance's (maintenance.py), the same notice."""
        if self.noticed_at is not None:
            return
        if not passed and self.total > 1:  # the other VMs of a slice get no notice
            self.passing = threading.Thread(target=self.pass_notice, daemon=True)
            self.passing.start()
        self.noticed_at = time.monotonic()
        self.stop_reason = f"{reason} notice"
        self.status.value["reason"] = reason
        what = "host maintenance" if reason == maintenance.REASON else "preempted"
        self.status.value["message"] = f"{what} ({how})"
        if not passed:  # this VM's own: the runner names its slice (run/watch.py)
            self.status.value["noticed_here"] = True
        self.say(
            f"{reason} notice ({how}): passing SIGTERM to the job; it may save its "
            f"state into TPUCTL_OUTPUT_DIR, outputs are synced a last time"
        )

    def pass_notice(self) -> None:
        """Tell every other worker's agent that the attempt ends on this VM's preemption:
        they sync their outputs and report PREEMPTED before the slice goes."""
        why = f"the VM of worker {self.worker} is being preempted"
        for k in range(self.total):
            if k != self.worker:
                self.quietly(partial(self.tell, status_path(self.args.job_id, k), why))

    def tell(self, name: str, why: str) -> None:
        for _ in range(5):
            value, generation = self.storage.read_json(name)
            told = protocol.with_notice(value, self.args.attempt, why)
            if told is None:
                return
            try:
                self.storage.write_json(name, told, generation)
                return
            except HttpError as e:
                if e.status != 412:
                    raise

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
        with contextlib.suppress(HttpError):
            if self.noticed_at is None and maintenance.now():
                self.notice("the VM is shutting down", reason=maintenance.REASON)

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

    def env(self, request: Json) -> dict[str, str]:
        env = dict(os.environ, PYTHONUNBUFFERED="1")  # so the log follows the script live
        env.update(self.megascale())  # before the user's: an --env value wins
        env.update(self.hosts_env(env))
        for name in request.get("env") or []:
            if name in self.user_env:
                env[name] = self.user_env[name]
            else:
                self.say(f"no value was given for the env variable {name}")
        # On a multislice job the worker id and count are the slice's (as the metadata
        # server has them); TPUCTL_SLICE_ID tells the slices apart.
        worker = self.me["worker"] if self.args.slices > 1 else self.worker
        env.update(
            TPUCTL_JOB_ID=self.args.job_id,
            TPUCTL_WORKER_ID=str(worker),
            TPUCTL_NUM_WORKERS=str(self.me["workers"]),
            TPUCTL_OUTPUT_DIR=str(self.outputs),
            TPUCTL_ATTEMPT=str(self.args.attempt),
            TPUCTL_RESTART=str(self.args.attempt - 1),
            TPUCTL_SLICE_ID=str(self.args.slice),
            TPUCTL_NUM_SLICES=str(self.args.slices),
        )
        env.update(sitehook.site_env(self.dir, env))  # `tpuctl stacks`, `tpuctl profile`
        return env

    def hosts_env(self, env: dict[str, str]) -> dict[str, str]:
        """On Compute Engine, what JAX and libtpu need to find the slice's other hosts and
        the VM does not give: a Compute Engine VM has no `agent-worker-number`, so
        `jax.distributed.initialize()` takes its GKE path, which reads TPU_WORKER_ID and
        TPU_WORKER_HOSTNAMES (jax/_src/clusters/cloud_tpu_cluster.py), as Google's guides
        for TPU7x slices set them by hand. The worker order is the VMs' `worker-id`,
        the list `worker-network-endpoints` in that order. What the VM already has wins."""
        if self.node.hosts_from_metadata:
            return {}
        hosts = [e.split(":")[2] if e.count(":") == 2 else e for e in self.me["endpoints"]]
        values = {"TPU_WORKER_ID": str(self.me["worker"]), "TPU_WORKER_HOSTNAMES": ",".join(hosts)}
        return {k: v for k, v in values.items() if v and not env.get(k)}

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

    def may_start(self, phase: str) -> bool:
        """Before the setup or the script: False when the job was cancelled, also by its
        cancel marker, which a cancel of a job whose agents had not started yet leaves.
        The status says the phase first, then the marker is read (protocol.py: a client
        that saw the job before RUNNING knows that it never starts)."""
        if self.cancelled:
            return False
        self.quietly(lambda: self.status.write(state=protocol.RUNNING, phase=phase))
        marker, _ = self.storage.read_json(protocol.cancel_path(self.args.job_id))
        if protocol.cancel_marked(marker) and not self.cancelled:
            self.stop_reason = f"the job was cancelled before its {phase} started"
            self.status.value["message"] = self.stop_reason
        return not self.cancelled

    def supervise(self, command: list[str], env: dict[str, str], phase: str) -> int:
        """Run one command to its end, heartbeating; on a cancel SIGTERM, then SIGKILL."""
        self.ran = True
        with open(str(self.local_log), "ab") as log:
            proc = subprocess.Popen(
                command,
                cwd=str(self.code),
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        running = {"state": protocol.RUNNING, "phase": phase, "child_pid": proc.pid}
        self.quietly(lambda: self.status.write(**running))
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
                self.say(
                    f"the {phase} still runs {self.args.notice_budget:g}s after the "
                    "preemption notice: syncing the outputs now"
                )
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

    def refresh(self) -> None:
        """Against the retention rule (retention.py): the request and record written
        again (worker 0), the outputs the bucket lost uploaded again (every worker)."""
        if self.worker == 0:
            self.kept.renew()
        gone = self.sync.recheck()
        if gone:
            self.say(f"{gone} output file(s) were gone from the bucket: uploading them again")
            self.sync.sync()

    def heartbeat(self, stop: threading.Event) -> None:
        """Every --heartbeat seconds, whatever the job does (fetching, running, syncing
        the outputs): the status rewritten, and on worker 0 its peers looked at."""
        while not stop.wait(self.args.heartbeat):
            self.quietly(self.status.write)
            if self.status.notice_requested:  # a peer's VM is preempted
                self.notice(self.status.notice_requested, passed=True)
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
        wait = self.unstarted() if len(current) < self.total - 1 else None  # teardown.py
        lost = self.peers.lost(current, range(1, self.total), unstarted=wait)
        if not lost or self.cancelled:
            return
        silent = int(self.peers.silent_for(lost[0]))
        why = f"worker {lost[0]} lost: no heartbeat for {silent}s"
        for k in lost:
            self.storage.update_json(
                status_path(self.args.job_id, k),
                lambda v, k=k: protocol.ended(
                    v, k, self.args.attempt, protocol.LOST, f"no heartbeat for {silent}s"
                ),
            )
        for k in set(range(1, self.total)) - set(lost):
            self.storage.update_json(status_path(self.args.job_id, k), protocol.with_cancel)
        self.status.value["message"] = why
        self.stop_reason = why

    def run(self) -> int:
        private_dir(self.dir)
        self.outputs.mkdir(exist_ok=True)
        self.code.mkdir(exist_ok=True)
        self.quietly(lambda: self.status.write(state=protocol.FETCHING))
        stop = threading.Event()
        watches = (self.watch_preemption, partial(maintenance.watch, self), self.hang.watch)
        for work in (self.heartbeat, *watches, self.chips.watch):
            threading.Thread(target=work, args=(stop,), daemon=True).start()
        try:
            return self._run()
        finally:
            stop.set()

    def _run(self) -> int:
        code, state = 1, protocol.FAILED
        exit_status: int | None = code
        try:
            request = fetch_code(self.storage, self.args.job_id, self.code, self.args.digest)
            self.kept.keep(request)
            self.manifests.restore(self.sync)  # none on attempt 1 (outputs.py)
            env = self.env(request)
            code = launch(self, request, env)
            if self.signalled:
                self.check_signal()
            state = protocol.SUCCEEDED if code == 0 else protocol.FAILED
            if self.cancelled:
                state = protocol.CANCELLED
            if self.noticed_at is not None:
                state = protocol.PREEMPTED
            if state == protocol.CANCELLED and not self.ran:  # no exit status to tell
                exit_status, code = None, 1
                self.say(f"cancelled ({self.stop_reason or 'on request'}): nothing ran")
            else:
                exit_status = code
                self.say(f"{state.lower()} with exit status {code}")
        except envs.EnvFailed as e:  # said once, by the worker that met it (envs.py)
            self.say(f"error: {e}")
            self.status.value["message"] = str(e)[:500] if e.here else ""
            code, exit_status = 1, None  # nothing of the job ran
        except PullFailed as e:  # the registry's refusal, said by each worker
            self.say(f"error: {e}")
            self.status.value["message"] = str(e)[:500]
            code, exit_status = 1, None  # nothing of the job ran
        except Refused as e:  # not what the user submitted: nothing of it runs
            self.say(f"refused: {e}")
            self.status.value["message"] = f"refused: {e}"[:500]
            exit_status = None
        except Exception as e:  # noqa: BLE001 - reported in the log and the status
            self.say(f"error: {e!r}")
            self.status.value["message"] = repr(e)[:500]
            exit_status = code
        self.quietly(self.sync.sync)  # first: what a preempted job resumes from
        if self.passing is not None:  # the peers told before this VM goes
            self.passing.join(timeout=self.args.heartbeat * 3)
        self.quietly(lambda: self.log.upload(force=True))
        self.quietly(
            lambda: self.status.write(state=state, exit_status=exit_status, ended=time.time())
        )
        if self.status.value.get("reason") in tpu_health.LEFT:  # it comes back, or is replaced
            self.say(tpu_health.LEFT[self.status.value["reason"]])
        elif self.worker == 0 and self.args.teardown:
            if state == protocol.PREEMPTED and getattr(self.args, "supervisor", None):
                # the supervisor's after_death deletes it once this agent has ended
                self.say(
                    "preempted: the node is deleted once this agent has ended; a "
                    "restart runs on a new one"
                )
            elif state == protocol.PREEMPTED:  # `agent run`: no supervisor to do it
                self.say("preempted: the node is left to the runner (or gc) to delete")
            else:
                self.teardown()
        elif self.worker == 0 and self.args.slices <= 1:  # the node stays: free it for others
            self.quietly(lambda: claims.release(self.storage, self.me, self.args.job_id))
        return code


def private_dir(path: Path) -> None:
    """The job's folder on the VM, readable by its user alone (0o700): the script's log,
    its outputs and the copies of the request and record are no other VM user's."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(str(path), 0o700)


def _kill(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)  # the child leads its own process group: its children go too
