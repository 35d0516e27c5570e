"""Watching an attempt: every worker's log streamed live over SSH, the statuses read
from the bucket, and the node checked for preemption, until every status is final.

One event loop does it all: a status poller (its blocking reads in threads) and a
follower per worker, each resuming from the byte offset it had printed when its
connection drops. What the followers did not print (a worker whose node is already
gone) is read from the bucket copies of the logs at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from tpuctl.agent import bundle, protocol
from tpuctl.concurrency import run_async
from tpuctl.errors import (
    CloudError,
    ConnectionDropped,
    NotFoundError,
    Preempted,
    SshError,
    TpuctlError,
)
from tpuctl.models import NODE_DEAD
from tpuctl.services import jobs
from tpuctl.services.run import agents
from tpuctl.services.run.spec import Job
from tpuctl.waiting import aretrying

if TYPE_CHECKING:
    from tpuctl.cloud.ssh import Endpoint

T = TypeVar("T")
TAIL_GRACE = 5.0  # once the job is over, how long the followers may print its tail
NODE_CHECK_EVERY = 2  # status polls between two looks at the node's state
MAINTENANCE = "maintenance"  # a restart's reason after a host maintenance
MAINTENANCE_STATE = "REPAIRING"  # a TPU API node's state during a host maintenance


def node_lost(job: Job) -> str | None:
    """The node's state when it can no longer run the job, else None. On a multislice
    job, the first slice that cannot: one lost slice ends the attempt of every slice."""
    for i, name in enumerate(job.slice_names):
        try:
            state = job.adapters.backend.get_node(name).state
        except NotFoundError:  # preempted (a spot VM deleted at its preemption) or deleted
            state = job.adapters.backend.gone_state(name)
        except TpuctlError:
            continue
        if state in NODE_DEAD or state in ("DELETED", MAINTENANCE_STATE):
            return f"{state} (slice {i})" if job.multislice else state
    return None


async def _in_thread(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` in a daemon thread. Not `asyncio.to_thread`: its executor is waited
    for when the loop ends, so a Ctrl-C would wait for a bucket read being retried."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def work() -> None:
        try:
            result, error = fn(*args), None
        except BaseException as e:  # noqa: BLE001 - handed to the awaiting task
            result, error = None, e
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=work, daemon=True).start()
    return await future


def watch(job: Job, workers: int) -> dict[int, dict[str, Any]]:
    """Stream every worker's log until all statuses are final, or an agent is lost (see
    `job.lost`); return them.

    Raises `Preempted` when the node goes away under the job, or its agents ended the
    attempt on a preemption notice (they synced the outputs first)."""
    offsets = dict.fromkeys(range(workers), 0)
    final, lost = run_async(_watch(job, workers, offsets))
    if lost:  # first the workers that still run: their outputs, their final statuses
        with contextlib.suppress(TpuctlError):  # the bucket unreadable: recreated all the same
            agents.settle_preempted(job, workers, lost)
    if not lost and any(s.get("state") == protocol.PREEMPTED for s in final.values()):
        _print_rest_from_bucket(job, final, offsets)
        lost = _preempted(job, final)
    if lost:
        raise Preempted(lost, _reason(job, lost, final))
    _print_rest_from_bucket(job, final, offsets)
    return final


def _reason(job: Job, state: str, final: dict[int, dict[str, Any]]) -> str:
    """ "maintenance" when the node went down for a host maintenance: an agent ended the
    attempt on its notice (agent/maintenance.py), or the TPU API shows the node REPAIRING
    (where it stays while the maintenance lasts); else "preemption"."""
    if state.startswith(MAINTENANCE_STATE):
        return MAINTENANCE
    seen = final or agents.reported(job)
    said = any(s.get("reason") == MAINTENANCE for s in seen.values())
    return MAINTENANCE if said else "preemption"


def _preempted(job: Job, final: dict[int, dict[str, Any]]) -> str:
    """PREEMPTED, on a multislice job naming the slices whose VM had the notice itself
    (its agent said so: `noticed_here`), as `node_lost` names a lost slice."""
    per = max(1, job.workers // job.spec.slices)
    slices = sorted({w // per for w, s in final.items() if s.get("noticed_here")})
    if not job.multislice or not slices:
        return protocol.PREEMPTED
    return f"{protocol.PREEMPTED} (slice {', '.join(map(str, slices))})"


async def _watch(
    job: Job, workers: int, offsets: dict[int, int]
) -> tuple[dict[int, dict[str, Any]], str | None]:
    assert job.plan is not None
    # Workers whose follower holds an open stream now: once the job is over, only those
    # are worth waiting for (the others would reconnect to a node that may be gone).
    streaming: set[int] = set()
    over = asyncio.Event()  # set once the watch ends: no follower connects again
    # A worker whose start answer was lost is read from the bucket at the end.
    followers = {
        ep.worker: asyncio.ensure_future(_follow(job, ep, offsets, streaming, over))
        for ep in job.plan.endpoints
        if ep.worker in job.logs
    }
    try:
        final, lost = await _poll(job, workers)
        tail = [f for w, f in followers.items() if w in streaming]
        if tail and not lost:
            # The job is over; give the open streams a moment to print the tail, then take
            # the rest from the bucket (the node may already be gone).
            await asyncio.wait(tail, timeout=TAIL_GRACE)
        return final, lost
    finally:  # also on Ctrl-C
        over.set()
        pending = [f for f in followers.values() if not f.done()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)


async def _poll(job: Job, workers: int) -> tuple[dict[int, dict[str, Any]], str | None]:
    """(final statuses, None) once every worker's status is final or an agent is lost
    (`job.lost`), or ({}, the node's state) when the node can no longer run the job."""
    rounds, told = 0, False
    job.beats, job.lost = None, {}  # a new attempt: every agent starts afresh
    last_read = time.monotonic()
    while True:
        try:
            current: dict[int, dict[str, Any]] | None = await _in_thread(agents.statuses, job)
        except TpuctlError as e:
            current = None  # unreadable now: that says nothing of the agents, for a while
            unread = time.monotonic() - last_read
            if unread > job.spec.heartbeat_deadline:  # no heartbeat seen for that long
                raise CloudError(
                    f"cannot read the status of job {job.job_id} for {int(unread)}s "
                    f"(--heartbeat-deadline): {e}"
                ) from None
        else:
            last_read = time.monotonic()
        if current is not None:
            if agents.all_final(current, workers):
                return current, None
            if agents.find_lost(job, current, workers, job.spec.heartbeat_deadline):
                return current, None
            if not told and any(s.get("state") == protocol.PREEMPTED for s in current.values()):
                # one VM preempted (a Compute Engine slice's, one at a time): the others
                # end the attempt too, their outputs synced (their agents were told by
                # its agent already, unless it could not)
                told = True
                await _in_thread(agents.pass_notice, job, workers, "another worker was preempted")
        rounds += 1
        if rounds % NODE_CHECK_EVERY == 0 and (state := await _in_thread(node_lost, job)):
            # Worker 0's agent writes the job's final status, then deletes the node: the
            # statuses read above may be from just before that. Read them again, so that
            # a job that ended is not taken for one that lost its node.
            with contextlib.suppress(TpuctlError):
                current = await _in_thread(agents.statuses, job)
                if agents.all_final(current, workers):
                    return current, None
            return {}, state
        await asyncio.sleep(agents.STATUS_POLL)


async def _follow(
    job: Job, ep: Endpoint, offsets: dict[int, int], streaming: set[int], over: asyncio.Event
) -> None:
    """Print one worker's log from where it was left until the agent has exited, or the
    watch is `over`."""
    plan, ssh = job.plan, job.adapters.ssh
    assert plan is not None

    def out(stream: str, data: bytes) -> None:
        if stream == "stdout":
            offsets[ep.worker] += len(data)
            job.ui.log(ep.worker, data)

    async def once() -> None:
        command = bundle.command(
            "follow",
            job.logs[ep.worker],
            str(offsets[ep.worker]),
            str(job.pids[ep.worker]),
            root=agents.REMOTE_ROOT,
        )
        async with ssh.session(ep, plan.user, plan.key, plan.known_hosts) as session:
            streaming.add(ep.worker)
            try:
                status = await session.run(command, out)
                if status == bundle.REFUSED:  # changed on the VM (by the job?): sent again
                    agent, root = bundle.build(), agents.REMOTE_ROOT
                    await session.run(bundle.install_command(root), lambda *_: None, stdin=agent)
                    status = await session.run(command, out)
            finally:
                streaming.discard(ep.worker)
        if status:
            raise ConnectionDropped(f"{ep.host}: the log stream ended with status {status}")

    async def again(e: BaseException) -> bool:
        # The stream is cancelled once the job is over. A cancel can also come out of a
        # connection attempt as a connection error (on Python 3.11 `asyncio.wait_for`,
        # which asyncssh's connect timeout uses, may return the inner error instead):
        # retried, it was lost, and the watch waited for ever on a VM that was gone.
        return isinstance(e, SshError) and not over.is_set()

    await aretrying(again, initial=0.5, maximum=5.0)(once)


def _print_rest_from_bucket(
    job: Job, final: dict[int, dict[str, Any]], offsets: dict[int, int]
) -> None:
    """What the followers did not print of each worker's log, from the bucket's copy (read
    from where they stopped)."""
    assert job.bucket is not None
    logs = [(w, str(s["log"]), offsets.get(w, 0)) for w, s in sorted(final.items()) if s.get("log")]
    for worker, _, start, data in jobs.log_tails(job.bucket, job.job_id, logs):
        job.ui.log(worker, data)
        offsets[worker] = start + len(data)
