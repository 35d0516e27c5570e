"""tpuctl run: provision (or reuse) a node, stage the code, start the agents, follow the
logs, collect the outputs, and tear down on every exit path.

The agent on each worker (tpuctl/agent/agent.py) owns the job once started: it runs the
script, uploads logs, status and outputs to the bucket, and worker 0 deletes the node
when every worker has finished and teardown was asked for. The client here only
watches; if it dies, nothing is lost. Every exit path of the client that happens before
the agents own the job deletes a node this run created (when teardown was asked).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tpuctl import catalog
from tpuctl.agent import bundle
from tpuctl.errors import CloudError, NotFoundError, QuotaError, TpuctlError, UsageError
from tpuctl.models import DEAD_STATES, JOB, Node
from tpuctl.services import cost, jobs, nodes, queued, staging

if TYPE_CHECKING:
    from tpuctl.cloud.quota import QuotaApi
    from tpuctl.cloud.ssh import Endpoint, SshApi
    from tpuctl.cloud.storage import Bucket
    from tpuctl.cloud.tpu import TpuApi
    from tpuctl.config import Target
    from tpuctl.services.ssh import Plan

REMOTE_ROOT = "~/.tpuctl"
FINAL_STATES = frozenset(jobs.FINAL)
STATUS_POLL = 1.0


class RunUI(Protocol):
    """What the runner tells the user; the CLI implements it (stderr, spinners)."""

    def info(self, message: str) -> None: ...

    def progress(self, label: str) -> Any: ...  # a context manager yielding update(state, s)

    def log(self, worker: int, data: bytes) -> None: ...

    def set_workers(self, count: int) -> None: ...

    def log_marker(self, text: str) -> None: ...


@dataclass
class RunSpec:
    script: str  # relative to workdir
    workdir: Path
    args: list[str] = field(default_factory=list)
    node: str | None = None
    accelerator: str = "v3-8"
    version: str | None = None
    spot: bool = False
    excludes: list[str] = field(default_factory=list)
    bucket: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    setup: str | None = None
    outputs: Path | None = None
    teardown: bool = True
    detach: bool = False
    name: str | None = None
    ttl: int | None = None
    idle_timeout: int | None = None
    queued: bool = False  # ask for the node through a queued resource
    valid_until: int | None = None  # with queued: seconds the request may wait
    restarts: int = 0  # recreate and restart after a preemption at most this often
    retry_on_failure: bool = False  # a failed script counts as restartable too
    sync_every: float = 30.0  # seconds between output uploads (checkpoints to resume from)


@dataclass
class Adapters:
    tpu: TpuApi
    ssh: SshApi
    bucket: Callable[[str], Bucket]
    quotas: QuotaApi | None = None


@dataclass
class JobOutcome:
    job_id: str
    node: str
    exit_status: int
    states: dict[int, str]
    outputs: list[Path] = field(default_factory=list)
    torn_down: bool = False
    restarts: int = 0
    message: str = ""


class Preempted(Exception):
    """The node went away under the job (PREEMPTED, TERMINATED, or deleted by someone)."""

    def __init__(self, state: str) -> None:
        super().__init__(state)
        self.state = state


class Interrupted(Exception):
    """The user asked to stop (Ctrl-C, SIGTERM, SIGHUP)."""


def job_node_name(job_id: str) -> str:
    return f"tpuctl-{job_id}"


class Runner:
    def __init__(self, adapters: Adapters, target: Target, spec: RunSpec, ui: RunUI) -> None:
        self.a = adapters
        self.target = target
        self.spec = spec
        self.ui = ui
        self.job_id = staging.new_job_id()
        self.node_name = spec.node or job_node_name(self.job_id)
        self.full_name = f"{target.parent}/nodes/{self.node_name}"
        self.created = False  # did this run create the node?
        self.agents_started = False
        self.bucket: Bucket | None = None
        self.plan: Plan | None = None
        self.pids: dict[int, int] = {}
        self.logs: dict[int, str] = {}
        self.attempt = 1

    # -- the node -----------------------------------------------------------------
    def _node_spec(self) -> nodes.CreateSpec:
        return nodes.CreateSpec(
            name=self.node_name,
            accelerator=self.spec.accelerator,
            version=self.spec.version,
            spot=self.spec.spot,
            labels={JOB: self.job_id},
            ttl=self.spec.ttl,
            idle_timeout=self.spec.idle_timeout,
        )

    def _start_node(self) -> tuple[str | None, Node | None]:
        """Create the job's node (or find --node); returns (operation, existing node)."""
        if self.spec.node:
            try:
                node = self.a.tpu.get_node(self.full_name)
            except NotFoundError:
                node = None
            if node is not None:
                if node.state != "READY":
                    raise UsageError(
                        f"node {node.name} is {node.state}, not READY",
                        hint=f"start it (`tpuctl start {node.name}`) or pick another --node",
                    )
                return None, node
        spec = self._node_spec()
        body = nodes.validate_create(self.a.tpu, self.target, spec, self.a.quotas)
        rate = cost.hourly(spec.accelerator, spec.spot)
        if rate is not None:
            kind = "spot" if spec.spot else "on-demand"
            self.ui.info(
                f"{spec.accelerator} {kind}: about {cost.money(rate, per_hour=True)} ({cost.NOTE})"
            )
        self.created = True
        if self.spec.queued:
            queued.create_queued(self.a.tpu, self.target, self.node_name, body, self._queue())
            return None, None
        return nodes.create_node(self.a.tpu, self.target, spec, body, self.a.quotas), None

    def _queue(self) -> queued.QueueOptions:
        return queued.QueueOptions(valid_until=self.spec.valid_until)

    def _wait_ready(self, op: str | None) -> Node:
        if self.spec.queued:
            # On Ctrl-C, timeout, FAILED or SUSPENDED the request is deleted there.
            with self.ui.progress(f"queued {self.node_name} ({self.spec.accelerator}):") as update:
                return queued.provision(
                    self.a.tpu, self.target, self.node_name, self._queue(), progress=update
                )
        with self.ui.progress(f"creating {self.node_name} ({self.spec.accelerator}):") as update:
            return nodes.wait_for_state(
                self.a.tpu,
                self.full_name,
                {"READY"},
                operation=op,
                fail_states=nodes.FAILED_CREATE_STATES,
                progress=update,
            )

    # -- staging ------------------------------------------------------------------
    def _stage(self, workers: int) -> staging.StagedJob:
        assert self.bucket is not None
        job = staging.JobSpec(
            project=self.target.project,
            zone=self.target.zone,
            node=self.node_name,
            accelerator=self.spec.accelerator,
            workers=workers,
            script=self.spec.script,
            bucket=self.bucket.name,
            args=list(self.spec.args),
            env_names=sorted(self.spec.env),
            setup=self.spec.setup,
            teardown=self.spec.teardown,
            name=self.spec.name,
            job_id=self.job_id,
        )
        return staging.stage_job(self.bucket, job, self.spec.workdir, self.spec.excludes)

    # -- the agents ---------------------------------------------------------------
    def _start_agents(self) -> None:
        from tpuctl.services import remote
        from tpuctl.services import ssh as ssh_service

        assert self.bucket is not None
        bucket_name = self.bucket.name
        self.plan = ssh_service.plan(self.a.tpu, self.a.ssh, self.full_name, workers="all")
        agent = bundle.build()
        env_json = json.dumps(self.spec.env).encode()
        started: dict[int, dict[str, Any]] = {}

        async def install_and_start(session: Any, ep: Endpoint) -> int:
            install = bundle.install_command(REMOTE_ROOT)
            status = await session.run(install, lambda *_: None, stdin=agent)
            if status:
                return status
            out = bytearray()
            command = bundle.command(
                "agent",
                "start",
                "--job-id",
                self.job_id,
                "--bucket",
                bucket_name,
                "--worker",
                str(ep.worker),
                "--heartbeat",
                "2",
                "--attempt",
                str(self.attempt),
                "--sync-every",
                str(self.spec.sync_every),
                root=REMOTE_ROOT,
            )
            status = await session.run(
                command,
                lambda stream, data: out.extend(data) if stream == "stdout" else None,
                stdin=env_json,
            )
            if status == 0:
                started[ep.worker] = json.loads(bytes(out).decode().strip().splitlines()[-1])
            return int(status)

        with self.ui.progress("starting the job on every worker:") as update:
            update("SSH", 0.0)
            # Installing is idempotent, and so is `agent start` for one job and
            # attempt (a second start reports the running agent), so a dropped
            # connection is simply tried again.
            results = remote.on_workers(
                self.a.ssh,
                self.plan,
                install_and_start,
                connect_timeout=300.0,
                idempotent=True,
                action_timeout=60.0,  # a session that never ends is a lost one: retry
                # ...unless the agent is known to run already (its answer was what got lost)
                retry_if=lambda worker: worker not in self._reported(),
            )
        lost = [r for r in results if r.status and r.worker not in started]
        if lost:
            # The answer may be what was lost (e.g. a job so short that its node was
            # already torn down): an agent that reported a status did start.
            reported = self.statuses()
            lost = [r for r in lost if r.worker not in reported]
        failed = remote.failure_summary(lost) if lost else None
        if failed:
            raise CloudError(f"could not start the job: {failed}")
        self.pids = {w: int(info["pid"]) for w, info in started.items()}
        self.logs = {w: str(info["log"]) for w, info in started.items()}
        self.agents_started = True

    # -- watching -----------------------------------------------------------------
    def statuses(self) -> dict[int, dict[str, Any]]:
        """The workers' status objects of the current attempt."""
        assert self.bucket is not None
        return {
            w: s
            for w, s in jobs.statuses(self.bucket, self.job_id).items()
            if int(s.get("attempt", 1)) == self.attempt
        }

    def _reported(self) -> dict[int, dict[str, Any]]:
        try:
            return self.statuses()
        except TpuctlError:
            return {}

    def _node_lost(self) -> str | None:
        """The node's state when it can no longer run the job, else None."""
        try:
            state = self.a.tpu.get_node(self.full_name).state
        except NotFoundError:
            return "DELETED"
        except TpuctlError:
            return None
        return state if state in DEAD_STATES else None

    def _watch(self, workers: int) -> dict[int, dict[str, Any]]:
        """Stream every worker's log until all statuses are final; return them."""
        assert self.plan is not None
        offsets = dict.fromkeys(range(workers), 0)
        done = threading.Event()
        final: dict[int, dict[str, Any]] = {}
        lost: list[str] = []

        def poll_status() -> None:
            rounds = 0
            while not done.is_set():
                try:
                    current = self.statuses()
                except TpuctlError:
                    current = {}
                if len(current) >= workers and all(
                    s.get("state") in FINAL_STATES for s in current.values()
                ):
                    final.update(current)
                    done.set()
                    return
                rounds += 1
                if rounds % 2 == 0 and (state := self._node_lost()):
                    lost.append(state)
                    done.set()
                    return
                done.wait(STATUS_POLL)

        async def follow(ep: Endpoint) -> None:
            assert self.plan is not None
            from tpuctl.cloud.ssh import SshError

            delay = 0.5
            while not done.is_set():

                def out(stream: str, data: bytes, w: int = ep.worker) -> None:
                    if stream == "stdout":
                        offsets[w] += len(data)
                        self.ui.log(w, data)

                command = bundle.command(
                    "follow",
                    self.logs[ep.worker],
                    str(offsets[ep.worker]),
                    str(self.pids[ep.worker]),
                    root=REMOTE_ROOT,
                )
                try:
                    async with self.a.ssh.session(
                        ep, self.plan.user, self.plan.key, self.plan.known_hosts
                    ) as session:
                        if await session.run(command, out) == 0:
                            return
                except SshError:
                    pass
                await asyncio.sleep(delay)
                delay = min(5.0, delay * 1.6)

        async def main() -> None:
            assert self.plan is not None
            poller = asyncio.get_running_loop().run_in_executor(None, poll_status)
            # A worker whose start answer was lost is read from the bucket at the end.
            followers = [
                asyncio.ensure_future(follow(ep))
                for ep in self.plan.endpoints
                if ep.worker in self.logs
            ]
            try:
                await poller
                # The job is over; give the followers a moment to print the tail, then
                # take the rest from the bucket (the node may already be gone).
                if followers:
                    await asyncio.wait(followers, timeout=5.0)
            finally:
                done.set()  # also on Ctrl-C: the poller thread must end for asyncio.run
                pending = {f for f in followers if not f.done()}
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)

        try:
            asyncio.run(main())
        finally:
            done.set()
        if lost:
            raise Preempted(lost[0])
        self._print_rest_from_bucket(final, offsets)
        return final

    def _print_rest_from_bucket(
        self, final: dict[int, dict[str, Any]], offsets: dict[int, int]
    ) -> None:
        assert self.bucket is not None
        for worker, status in sorted(final.items()):
            log = status.get("log")
            if not log:
                continue
            try:
                data, _ = self.bucket.read_bytes(log)
            except NotFoundError:
                continue
            if len(data) > offsets.get(worker, 0):
                self.ui.log(worker, data[offsets.get(worker, 0) :])
                offsets[worker] = len(data)

    def cancel(self) -> None:
        """Ask every worker's agent to stop the job (it then tears down as usual)."""
        assert self.bucket is not None
        jobs.cancel(self.bucket, self.job_id)

    def wait_final(self, workers: int, timeout: float) -> dict[int, dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            current = self.statuses()
            if len(current) >= workers and all(
                s.get("state") in FINAL_STATES for s in current.values()
            ):
                return current
            time.sleep(STATUS_POLL)
        return self.statuses()

    # -- teardown -----------------------------------------------------------------
    def teardown(self, wait_for_agent: float = 60.0) -> bool:
        """Make sure the node is gone: the agent deletes it; else delete it here.

        Any failure becomes one loud error naming the node and how to delete it.
        """
        try:
            return self._teardown(wait_for_agent)
        except TpuctlError as e:
            raise CloudError(
                f"teardown failed: node {self.node_name} in {self.target.zone} may still be "
                f"billing: {e}",
                hint=f"delete it: `tpuctl delete {self.node_name} --zone {self.target.zone} --yes`",
            ) from e

    def _teardown(self, wait_for_agent: float) -> bool:
        if self.spec.queued and self.created:
            # The request outlives its node otherwise (SUSPENDED, listed forever).
            queued.delete_request(self.a.tpu, queued.qr_name(self.target, self.node_name))
        if not self.agents_started or self._agent_teardown_failed():
            wait_for_agent = 0  # nobody else will delete it: do it now
        deadline = time.monotonic() + wait_for_agent
        with self.ui.progress(f"tearing down {self.node_name}:") as update:
            while True:
                try:
                    node = self.a.tpu.get_node(self.full_name)
                except NotFoundError:
                    return True
                if node.state == "DELETING" or time.monotonic() >= deadline:
                    break
                update(node.state, 0.0)
                time.sleep(1.0)
            results = nodes.delete_nodes(self.a.tpu, [node], progress=lambda n, s, e: update(s, e))
        if not results[0].ok:
            raise CloudError(results[0].message)
        return True

    def _agent_teardown_failed(self) -> bool:
        try:
            status = self.statuses().get(0, {})
        except TpuctlError:
            return False
        return str(status.get("teardown", "")).startswith("failed")

    # -- the whole thing ----------------------------------------------------------
    def run(self) -> JobOutcome:
        spec = self.spec
        if not (spec.workdir / spec.script).is_file():
            raise UsageError(
                f"script {spec.script} not found in {spec.workdir}",
                hint="give a file in the work dir (--workdir; default: the script's folder)",
            )
        region = catalog.region_of(self.target.zone)
        self.bucket = self.a.bucket(staging.bucket_name(spec.bucket, {}, self.target.project))
        try:
            op, existing = self._start_node()
            workers = len(existing.workers) if existing else _workers_of(spec.accelerator)
            with ThreadPoolExecutor(max_workers=1) as pool:
                bucket = self.bucket

                def stage() -> staging.StagedJob:
                    bucket.ensure(region)
                    return self._stage(workers)

                staged: Future[staging.StagedJob] = pool.submit(stage)
                node = existing or self._wait_ready(op)
                job = staged.result()
            self.ui.info(
                f"job {self.job_id}: {job.files} files, {job.uploaded} uploaded "
                f"({job.uploaded_bytes} bytes) to gs://{self.bucket.name}/"
                f"{staging.job_prefix(self.job_id)}"
            )
            self._start_agents()
        except BaseException:
            if self.created and spec.teardown:
                self._teardown_after_failure()
            raise
        if spec.detach:
            return JobOutcome(self.job_id, self.node_name, 0, {})
        self.ui.set_workers(len(node.workers))
        while True:
            try:
                final = self._watch(len(node.workers))
            except Preempted as e:
                if self.attempt > spec.restarts:
                    return self._give_up(e.state)
                self.ui.info(
                    f"node {self.node_name} is {e.state} during attempt {self.attempt}; "
                    f"recreating it (restart {self.attempt} of {spec.restarts})"
                )
                self._recreate()
                self._next_attempt()
                continue
            failed = any(int(s.get("exit_status") or 0) for s in final.values())
            if failed and spec.retry_on_failure and self.attempt <= spec.restarts:
                self.ui.info(f"attempt {self.attempt} failed; restarting (--retry-on-failure)")
                self._next_attempt()
                continue
            return self._finish(final)

    def _next_attempt(self) -> None:
        self.attempt += 1
        self.ui.log_marker(
            f"=== tpuctl: attempt {self.attempt} (TPUCTL_RESTART={self.attempt - 1}) ==="
        )
        self._start_agents()

    def _recreate(self) -> None:
        """Delete the lost node and create one with the same spec, waiting for capacity."""
        try:
            old = self.a.tpu.get_node(self.full_name)
            nodes.delete_nodes(self.a.tpu, [old])
        except NotFoundError:
            pass
        if self.spec.queued:
            queued.delete_request(self.a.tpu, queued.qr_name(self.target, self.node_name))
        delay = 5.0
        while True:
            try:
                spec = self._node_spec()
                if self.spec.queued:
                    body = nodes.validate_create(self.a.tpu, self.target, spec, self.a.quotas)
                    queued.create_queued(
                        self.a.tpu, self.target, self.node_name, body, self._queue()
                    )
                    op = None
                else:
                    op = nodes.create_node(self.a.tpu, self.target, spec, quotas=self.a.quotas)
                self.created = True
                self._wait_ready(op)
                return
            except QuotaError as e:
                # No capacity (or quota) right now: wait and try again, saying so.
                self.ui.info(f"{e}; trying again in {int(delay)}s")
                time.sleep(delay)
                delay = min(300.0, delay * 2)

    def _give_up(self, state: str) -> JobOutcome:
        final = self.statuses()
        states = {w: str(s.get("state")) for w, s in final.items()} or {0: state}
        outcome = JobOutcome(self.job_id, self.node_name, 1, states, restarts=self.attempt - 1)
        outcome.message = (
            f"node {self.node_name} was {state} during attempt {self.attempt} and the job has "
            f"used its {self.spec.restarts} restart(s) (--restarts)"
        )
        if self.spec.teardown:
            outcome.torn_down = self.teardown(wait_for_agent=0)
        return outcome

    def _finish(self, final: dict[int, dict[str, Any]]) -> JobOutcome:
        states = {w: str(s.get("state")) for w, s in final.items()}
        status = 0
        for _, s in sorted(final.items()):
            code = int(s.get("exit_status") or 0)
            if code:
                status = code
                break
        outcome = JobOutcome(self.job_id, self.node_name, status, states, restarts=self.attempt - 1)
        if self.spec.outputs is not None and self.bucket is not None:
            prefix = f"{staging.job_prefix(self.job_id)}outputs/"
            outcome.outputs = self.bucket.download_prefix(prefix, self.spec.outputs)
        if self.spec.teardown:
            outcome.torn_down = self.teardown()
        return outcome

    def stop(self, grace: float = 60.0) -> JobOutcome | None:
        """After an interruption: stop the job on every worker, then tear down as asked.

        Before the agents own the job, `run` has already cleaned up; nothing to do.
        """
        if not self.agents_started or self.plan is None:
            return None
        self.ui.info(f"stopping job {self.job_id} on every worker (Ctrl-C again to leave now)")
        self.cancel()
        final = self.wait_final(len(self.plan.node.workers), grace)
        states = {w: str(s.get("state")) for w, s in final.items()}
        outcome = JobOutcome(self.job_id, self.node_name, 130, states)
        if self.spec.teardown:
            outcome.torn_down = self.teardown()
        return outcome

    def _teardown_after_failure(self) -> None:
        try:
            self.teardown(wait_for_agent=0)
        except TpuctlError as e:
            self.ui.info(f"error: {e}")


def _workers_of(accelerator: str) -> int:
    acc = catalog.parse_accelerator(accelerator)
    return acc.workers if acc else 1
