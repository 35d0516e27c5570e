"""tpuctl run as a story: provision (or reuse) a node while the code is staged, start
the agents, watch the job, restart it after a preemption, collect the outputs, and tear
down on every exit path.

The agent on each worker (tpuctl/agent/agent.py) owns the job once started: it runs the
script, uploads logs, status and outputs to the bucket, and worker 0 deletes the node
when every worker has finished and teardown was asked for. The client only watches; if
it dies, nothing is lost. Everything after the create call runs inside
`teardown.guard`, which deletes the node whenever nobody else would.

A multislice job (`--slices N`, docs/multislice.md) runs on the N slices of one queued
resource at once: agents on every worker of every slice, numbered across the job; a
lost slice ends the attempt everywhere and the whole request is made again (multislice
training cannot go on with a slice missing).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tpuctl import catalog, wording
from tpuctl.agent import protocol
from tpuctl.errors import Preempted, TpuctlError, UsageError
from tpuctl.models import Node
from tpuctl.services import cost, late_receipt, outputs, receipt, staging, workdir
from tpuctl.services.run import (
    agents,
    environment,
    lease,
    maintenance,
    provision,
    repair,
    signing,
    teardown,
    vouching,
    watch,
)
from tpuctl.services.run.spec import (
    DEFAULT_OUTPUTS,
    Adapters,
    Job,
    JobOutcome,
    RunSpec,
    RunUI,
    job_node_name,
)

if TYPE_CHECKING:
    from tpuctl.cloud.storage import Bucket
    from tpuctl.config import Target

Statuses = dict[int, dict[str, Any]]
T = TypeVar("T")
# After a Ctrl-C or a lost agent: how long the other agents may take to stop the script
# (their --grace is 30 s), and the silence after which an agent that does not even
# heartbeat (every 2 s) is taken for dead.
STOP_GRACE = 60.0
STOP_SILENCE = 10.0


def _in_background(fn: Callable[[], T]) -> Future[T]:
    future: Future[T] = Future()

    def work() -> None:
        try:
            future.set_result(fn())
        except BaseException as e:  # noqa: BLE001 - handed to whoever asks for the result
            future.set_exception(e)

    threading.Thread(target=work, daemon=True).start()
    return future


class Runner:
    def __init__(self, adapters: Adapters, target: Target, spec: RunSpec, ui: RunUI) -> None:
        job_id = staging.new_job_id()
        self.job = Job(adapters, target, spec, ui, job_id, spec.node or job_node_name(job_id))

    @property
    def job_id(self) -> str:
        return self.job.job_id

    @property
    def node_name(self) -> str:
        return self.job.node_name

    @property
    def zone(self) -> str:
        """The zone the job's node is in (after a failover, not the first one asked)."""
        return self.job.target.zone

    @property
    def bucket(self) -> Bucket | None:
        return self.job.bucket

    def run(self) -> JobOutcome:
        job, spec = self.job, self.job.spec
        job.marks["begin"] = time.time()
        staged = bool(spec.script or not spec.image)  # a command of the image: nothing is
        if staged and not (spec.workdir / spec.script).is_file():
            raise UsageError(
                f"script {spec.script} not found in {spec.workdir}",
                hint="give a file in the work dir (--workdir; default: the script's folder)",
            )
        runnable = spec.script.endswith(".py") or os.access(spec.workdir / spec.script, os.X_OK)
        if staged and not runnable:
            # It would fail on every worker (`./SCRIPT`: permission denied) after paying
            # for a node.
            raise UsageError(
                f"script {spec.script} is not executable: a script that is not .py runs as "
                f"./{spec.script}",
                hint=f"chmod +x {spec.workdir / spec.script}",
            )
        job.bucket = job.adapters.bucket(staging.bucket_name(spec.bucket, {}, job.target.project))
        # before anything is created or uploaded: the bucket is this project's
        staging.check_owner(
            job.bucket,
            job.target.project,
            job.adapters.project_number,
            spec.bucket_named_by,
            job.ui.info,
        )
        if not spec.node:  # before the lease makes the bucket, so in a zone that is kept
            provision.survey_zones(job)
        with lease.held(job), teardown.guard(job):
            node = self._provision_and_stage()
            job.marks["ready"] = time.time()
            if node.create_time is not None:  # the cloud's clock: within the two marks
                job.marks["created"] = node.create_time.timestamp()
            agents.start(job)
            job.marks["started"] = time.time()
            if spec.detach:  # the receipt is made by whoever sees the job end first
                late_receipt.save_marks(
                    job.bucket, job.job_id, job.marks, self._hourly(), spec.shape.name
                )
                return job.outcome(0, {})
            job.workers = len(node.workers) * spec.slices  # as the cloud made them
            job.ui.set_workers(job.workers, spec.slices)
            try:
                return self._attempts(job.workers)
            except TpuctlError:  # e.g. no node again after a preemption
                self._bring_before_failing()
                raise

    def _provision_and_stage(self) -> Node:
        """The job's node, READY, and its code in the bucket (staged while the node boots;
        a new node's zones were surveyed before)."""
        job, spec = self.job, self.job.spec
        bucket = job.bucket
        assert bucket is not None
        existing = provision.existing_node(job)
        if spec.teardown is None:  # --node without --teardown/--keep: delete it if made here
            spec.teardown = existing is None
        workers = len(existing.workers) if existing else spec.shape.hosts
        workers *= spec.slices  # every slice has the same workers
        job.workers = workers

        def stage() -> staging.StagedJob:
            bucket.ensure(catalog.region_of(job.target.zone))
            job.staging = True
            omit = workdir.own_files(spec.outputs, Path(DEFAULT_OUTPUTS))
            record = self._job_record(workers)
            return staging.stage_job(bucket, record, spec.workdir, spec.excludes, omit=omit)

        staged: list[Future[staging.StagedJob]] = []

        def start_staging() -> None:
            # In a daemon thread: a Ctrl-C while the node is created goes to teardown at
            # once, and the process may exit without waiting for the upload. Once: a
            # failover creates again elsewhere, with the same code.
            if not staged:
                staged.append(_in_background(stage))

        if existing is not None:
            start_staging()
        try:
            node = existing or provision.place(job, on_created=start_staging)
        except Exception:
            # A failure (not a Ctrl-C) lets the upload end first: nothing writes to the
            # bucket after `run` has returned.
            with contextlib.suppress(Exception):
                if staged:
                    staged[0].result()
            raise
        start_staging()
        record = staged[0].result()
        job.digest = record.digest
        provision.record_zone(job)
        provision.warn_cross_region(job)
        where = f"gs://{bucket.name}/{protocol.job_prefix(job.job_id)}"
        if spec.image and not spec.script:  # the image's command: its record, no code
            job.ui.info(f"job {job.job_id}: nothing staged (the image's command): {where}")
        else:
            job.ui.info(
                f"job {job.job_id}: {wording.count(record.files, 'file')}, {record.uploaded} "
                f"uploaded ({wording.size(record.uploaded_bytes)}) to {where}"
            )
        for line in staging.left_out(record):
            job.ui.info(line)
        return node

    def _job_record(self, workers: int) -> staging.JobSpec:
        job, spec = self.job, self.job.spec
        assert job.bucket is not None
        return staging.JobSpec(
            project=job.target.project,
            zone=job.target.zone,
            node=job.node_name,
            accelerator=spec.shape.name,
            workers=workers,
            script=spec.script,
            bucket=job.bucket.name,
            args=list(spec.args),
            env_names=sorted(spec.env),
            setup=spec.setup,
            teardown=bool(spec.teardown),
            name=spec.name,
            job_id=job.job_id,
            slices=spec.slices,
            environment=spec.environment,
            owner=spec.node_spec.owner,
            image=spec.image_pull,
        )

    def _attempts(self, workers: int) -> JobOutcome:
        """Watch attempt after attempt until one ends the job."""
        job, spec = self.job, self.job.spec
        while True:
            try:
                final = watch.watch(job, workers)
            except Preempted as e:
                if ended := provision.expired(job):  # its TTL or max cost: no restart
                    return self._give_up(e.state, ended)
                if e.reason == watch.MAINTENANCE and maintenance.comes_back(job):
                    maintenance.resume(job, e.state, self._next_attempt)
                    continue
                if job.attempt > spec.restarts:
                    return self._give_up(e.state)
                if job.multislice:
                    said = (
                        f"{job.what}: a slice is {e.state} during attempt {job.attempt}; "
                        f"recreating every slice (restart {job.attempt} of {spec.restarts})"
                    )
                else:
                    said = (
                        f"node {job.node_name} is {e.state} during attempt {job.attempt}; "
                        f"recreating it (restart {job.attempt} of {spec.restarts})"
                    )
                job.ui.info(said)
                job.agents_started = False  # until they start on the new node
                since = time.time()
                provision.recreate(job)
                self._next_attempt()
                job.recovery += time.time() - since
                job.restarts_for[e.reason] = job.restarts_for.get(e.reason, 0) + 1
                continue
            if job.lost:
                return self._lost(workers)
            if repair.broken(job, final) is not None:  # a worker's TPU did not come up
                if (done := repair.handle(job, final, self._next_attempt, self._finish)) is None:
                    continue
                return done
            failed = any(int(s.get("exit_status") or 0) for s in final.values())
            if failed and spec.retry_on_failure and job.attempt <= spec.restarts:
                job.ui.info(f"attempt {job.attempt} failed; restarting (--retry-on-failure)")
                self._next_attempt()
                continue
            return self._finish(final)

    def _next_attempt(self) -> None:
        job = self.job
        job.attempt += 1
        job.ui.log_marker(
            f"=== tpuctl: attempt {job.attempt} (TPUCTL_RESTART={job.attempt - 1}) ==="
        )
        agents.start(job)

    def _give_up(self, state: str, ended: str = "") -> JobOutcome:
        job = self.job
        final = agents.statuses(job)
        states = {w: str(s.get("state")) for w, s in final.items()} or {0: state}
        job.marks.setdefault("ended", time.time())
        outcome = job.outcome(1, states)
        outcome.message = ended or (
            f"{job.what} was {state} during attempt {job.attempt} and the job has "
            f"used its {job.spec.restarts} restart(s) (--restarts)"
        )
        if job.spec.teardown:
            outcome.torn_down = teardown.teardown(job, wait_for_agent=0)
        self._receipt(outcome)
        outcome.outputs = self.bring_outputs() or []  # what was synced before the end
        self._missed(outcome)
        return outcome

    def _lost(self, workers: int) -> JobOutcome:
        """An agent stopped beating: LOST for it, a stop for the others, then teardown."""
        job = self.job
        names = ", ".join(
            f"worker {job.label(w) if job.multislice else w}" for w in sorted(job.lost)
        )
        silent = int(max(job.lost.values()))
        job.ui.info(f"the agent of {names} is lost: no heartbeat for {silent}s; ending the job")
        agents.mark_lost(job)
        final = agents.wait_final(job, workers, STOP_GRACE, silence=STOP_SILENCE)
        if set(job.lost) - set(final):
            agents.mark_lost(job)  # lost while stopping, too
            final = agents.statuses(job)
        outcome = self._finish(final)
        outcome.message = (
            f"job {job.job_id} is LOST: the agent of {names} stopped answering "
            f"(no heartbeat for {silent}s; --heartbeat-deadline)"
        )
        return outcome

    def _finish(self, final: Statuses) -> JobOutcome:
        job = self.job
        job.marks.setdefault("ended", time.time())
        states = {w: str(s.get("state")) for w, s in final.items()}
        codes = [int(s.get("exit_status") or 0) for _, s in sorted(final.items())]
        code = next((c for c in codes if c), 0)
        if code == 0 and any(state != protocol.SUCCEEDED for state in states.values()):
            code = 1  # a job that did not succeed never exits 0 (docs/run.md)
        outcome = job.outcome(code, states)
        said = [
            f"{job.label(w)} {s['state']}: {s['message']}"
            for w, s in sorted(final.items())
            if s.get("message") and s.get("state") != protocol.SUCCEEDED
        ]
        if said:
            outcome.message = "; ".join(said)
        outcome.environment = environment.summary(final)
        if outcome.environment:  # the job's own build, checked here: later jobs may use it
            vouching.vouch(job, final)
        outcome.outputs = self.bring_outputs() or []
        self._missed(outcome)
        if job.spec.teardown:
            outcome.torn_down = teardown.teardown(job)
        self._receipt(outcome)
        return outcome

    def _missed(self, outcome: JobOutcome) -> None:
        """A job whose outputs could not be written where asked does not end in success:
        its message says why and how to fetch them."""
        if self.job.outputs_missed:
            said = (outcome.message, self.job.outputs_missed)
            outcome.message = "; ".join(m for m in said if m)

    def _receipt(self, outcome: JobOutcome) -> None:
        """Where the job's time and money went (services/receipt.py)."""
        job, spec = self.job, self.job.spec
        if outcome.torn_down:
            job.marks["gone"] = time.time()
        env = float((outcome.environment or {}).get("seconds") or 0.0)
        found = self._rate()
        outcome.receipt = receipt.of_marks(
            job.marks,
            job.recovery,
            env,
            self._hourly(),
            spec.shape.name,
            "" if found is None else found.basis,
        )
        outcome.receipt.restarts = dict(job.restarts_for)
        if spec.image_pull is not None:
            outcome.receipt.image = spec.image_pull["name"]

    def _rate(self) -> cost.Rate | None:
        """The price of one slice of the job's node where it is (None: no public price)."""
        node = self.job.spec.node_spec
        return cost.rate(self.job.spec.shape, node.spot or node.preemptible, self.zone)

    def _hourly(self) -> float | None:
        """USD per hour of the job's node(s) at list price (None: no public price)."""
        found = self._rate()
        return None if found is None else found.usd_per_hour * self.job.spec.slices

    def bring_outputs(self) -> list[Path] | None:
        """Download the outputs the bucket has of the job to where they come home, on
        every way the job ends; None when they stay in the bucket (--no-outputs)."""
        job = self.job
        dest = job.outputs_dir
        if dest is None or job.bucket is None:
            return None
        try:
            brought = outputs.download(job.bucket, job.job_id, dest, signing.key())
        except OSError as e:  # checked before the job, the folder can still go or change
            why = e.strerror or str(e)
            where = f"{e.filename}: {why}" if e.filename else f"{dest}: {why}"
            job.outputs_missed = (
                f"its outputs could not be written to {dest} ({where}); "
                f"`tpuctl outputs {job.job_id} DEST` fetches them into a folder DEST"
            )
            return []
        job.outputs_home = True
        where = f"gs://{job.bucket.name}/{protocol.outputs_prefix(job.job_id)}"
        for line in brought.notes(where):
            job.ui.info(line)
        return brought.written

    def _bring_before_failing(self) -> None:
        """A failure after agents ran an attempt (a node not made again after a
        preemption, say): what the job synced comes home, as on any other end."""
        job = self.job
        if not job.ran or job.outputs_home:
            return
        with contextlib.suppress(TpuctlError):
            brought = self.bring_outputs()
            if brought:
                job.ui.info(f"downloaded {len(brought)} output file(s) to {job.outputs_dir}")
        if job.outputs_missed:
            job.ui.info(job.outputs_missed)

    def stop(self, grace: float = STOP_GRACE) -> JobOutcome:
        """After an interruption: stop the job on every worker, then tear down as asked.

        Before the agents own the job, the guard has already cleaned up: the outcome says
        whether it deleted the node.
        """
        job = self.job
        if not job.agents_started or job.plan is None:
            outcome = job.outcome(130, {})
            outcome.torn_down = job.node_deleted
            outcome.started = job.agents_started
            return outcome
        job.ui.info(f"stopping job {job.job_id} on every worker (Ctrl-C again to leave now)")
        agents.cancel(job)
        workers = job.workers
        # An agent that does not answer the cancel within STOP_SILENCE is dead: no waiting
        # out the whole grace for it.
        final = agents.wait_final(job, workers, grace, silence=STOP_SILENCE)
        if job.lost:
            agents.mark_lost(job)
            final = agents.reported(job) or final
        outcome = job.outcome(130, {w: str(s.get("state")) for w, s in final.items()})
        if job.spec.teardown:
            outcome.torn_down = teardown.teardown(job)
        lease.release(job)
        return outcome
