"""No node left billing: the one guard around everything `run` does after its create
call, and the teardown it falls back on.

A multislice job's nodes are the slices of one queued resource: deleting the request
(with force) deletes every slice, on every path below.

Once the agents own an attempt, worker 0's agent deletes the node when the job ends
(even with the client gone); the client waits a moment for that, then deletes the
node itself. Before the agents own it (provisioning, staging, starting the agents,
recreating after a preemption), nobody else would: the guard deletes the node at once
on any failure or interruption. A Ctrl-C while agents own the job is left to
`Runner.stop`, which first stops the job on every worker.

The calls that lead to the delete request are quick, and a signal while they run waits
until the cloud has the request (`interrupts.deferred`): a second Ctrl-C during the
guard's cleanup leaves a node being deleted, not one billing. Only waits (the agent's
grace, the node going) are cut short at once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from tpuctl import interrupts
from tpuctl.agent import protocol
from tpuctl.errors import CloudError, NotFoundError, TpuctlError, WaitTimedOut
from tpuctl.models import NODE_DEAD, Node
from tpuctl.services import jobs, nodes, queued
from tpuctl.services.run import agents, lease
from tpuctl.services.run.spec import Job
from tpuctl.waiting import Progress, poll_until

AGENT_GRACE = 60.0  # how long the agent may take to delete the node itself


@contextlib.contextmanager
def guard(job: Job) -> Iterator[None]:
    """Delete the node this run created when what runs inside fails or is interrupted
    before agents own the job (and, on a failure, after)."""
    try:
        yield
    except BaseException as e:
        # A Ctrl-C while agents own the job: `Runner.stop` cancels it first.
        interrupted = isinstance(e, KeyboardInterrupt)
        left_to_stop = interrupted and job.agents_started
        if job.created and job.spec.teardown and not job.torn_down and not left_to_stop:
            _teardown_after_failure(job)
        if not job.agents_started:
            _end_record(job, protocol.CANCELLED if interrupted else protocol.FAILED, e)
        raise


def _end_record(job: Job, state: str, error: BaseException) -> None:
    """A job whose agents never started (for this attempt) gets its final state from the
    client: nobody else would write one, and `tpuctl jobs` would show it PENDING forever."""
    if job.bucket is None or not job.staging:
        return  # no record of it in the bucket
    why = "interrupted before its agents started" if state == protocol.CANCELLED else str(error)
    with contextlib.suppress(TpuctlError):
        jobs.mark_final(
            job.bucket, job.job_id, list(range(job.workers)), job.attempt, state, why[:500]
        )


def teardown(job: Job, wait_for_agent: float = AGENT_GRACE) -> bool:
    """Make sure the node is gone: the agent deletes it; else delete it here.

    Any failure becomes one loud error naming the node and how to delete it.
    """
    job.torn_down = True
    try:
        job.node_deleted = _teardown(job, wait_for_agent)
        return job.node_deleted
    except TpuctlError as e:
        raise CloudError(
            f"teardown failed: {job.what} in {job.target.zone} may still be billing: {e}",
            hint=f"delete it: `tpuctl delete {job.node_name} --zone {job.target.zone} --yes`",
        ) from e


def _teardown(job: Job, wait_for_agent: float) -> bool:
    a = job.adapters
    if job.spec.queued and job.created:
        # The request outlives its node otherwise (SUSPENDED, listed forever); a
        # multislice request takes every slice with it.
        request = queued.qr_name(job.target, job.node_name)
        if job.multislice:
            queued.delete_slices(a.backend, request, job.slice_names, job.ui.info)
            return True
        queued.delete_request(a.backend, request)
    if (
        not job.agents_started
        or not job.agent_teardown
        or 0 in job.lost
        or agents.agent_teardown_failed(job)
    ):
        wait_for_agent = 0  # nobody else will delete it: do it now
    with job.ui.progress(f"tearing down {job.node_name}:") as update:
        node: Node | None = None
        if wait_for_agent > 0:  # the agent's grace: a wait, cut short by a signal
            if _claimed_by_other(job):
                return False
            node = _node_left(job, wait_for_agent, update)
        with interrupts.deferred():  # quick calls, up to the cloud having the delete
            if wait_for_agent == 0:
                if _claimed_by_other(job):
                    return False
                node = _node_left(job, 0, update)
            if node is None:
                return True
            if not node.free_parts:
                asked = lambda _: _asked(job)  # noqa: E731
                [result] = nodes.delete_nodes(a.backend, [node], wait=False, asked=asked)
        if node.free_parts:  # its VMs are gone (the agent's delete): nothing bills
            nodes.remove_free_parts(a.backend, node, job.ui.info)
            return True
        if not result.ok:
            raise CloudError(result.message)
        # ends once nothing bills, its free parts (a slice's template and policy) deleted
        nodes.wait_gone(a.backend, job.full_name, progress=update, say=job.ui.info)
    return True


def _asked(job: Job) -> None:
    job.delete_asked = True


def _claimed_by_other(job: Job) -> bool:
    other, why = lease.claimed_by_other(job)
    if other:  # it took over this job's stale claim, and is alive
        job.ui.info(
            f"{job.what} is claimed by job {other} now: not deleting it ({why}); it bills "
            f"until that job ends, or `tpuctl delete {job.node_name} --zone {job.target.zone}`"
        )
        return True
    return False


def _node_left(job: Job, wait_for_agent: float, update: Progress) -> Node | None:
    """The node once the agent had `wait_for_agent` seconds to start deleting it (None:
    gone)."""
    tpu = job.adapters.backend

    def current() -> Node | None:
        try:
            return tpu.get_node(job.full_name)
        except NotFoundError:
            return None

    def check() -> tuple[bool | None, str]:
        node = current()
        # a node that cannot run (preempted; a slice whose group is gone with its VMs,
        # its template and policy left: cloud/compute/slice_state.py) has no agent to delete it
        if node is None or node.state == "DELETING" or node.state in NODE_DEAD:
            return True, "DELETING"
        return None, node.state

    if wait_for_agent > 0:
        with contextlib.suppress(WaitTimedOut):
            poll_until(
                check,
                what=f"the agent to delete {job.node_name}",
                progress=update,
                timeout=wait_for_agent,
                poll=1.0,
                factor=1.0,
                timed_out=lambda state, elapsed: WaitTimedOut(state),
            )
    return current()


def _teardown_after_failure(job: Job) -> None:
    try:
        teardown(job, wait_for_agent=0)
    except TpuctlError as e:
        job.ui.info(f"error: {e}")
