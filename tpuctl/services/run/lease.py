"""A job's hold on its node (the claim), and the lease its living client renews
(tpuctl/agent/claims.py has the objects and their rules; docs/run.md, "One job a node").

- The start lease: from before the create call to the end of `run`, the client rewrites
  `jobs/<id>/lease.json` every third of `--start-lease` (90 s). The boot guard of a node
  made for the job (agent/guard.py) deletes it once it has seen no renewal for a lease's
  length while no agent has started: a dead client's node goes within about a minute,
  a living client keeps a slow boot alive as long as it needs.
- The claim: before the job uses a node (given with `--node`, or made for it), it takes
  the node's claim. A claim held by a live job is refused, naming it; one whose job has
  ended, whose client and agents have gone silent, or that names an earlier node of the
  same name, is stale and taken over. It is released at the end on every path: by the
  client, or, when the agents go on without it (`--detach`, a client that left), by
  worker 0's agent when the job ends. Neither teardown deletes a node another job holds.

Liveness is judged by Cloud Storage's clock alone (the `updated` time of the holder's
lease and status objects against that of this job's own lease, just written): the
clocks of two machines are never compared.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

from tpuctl import catalog, timestamps
from tpuctl.agent import claims, protocol
from tpuctl.errors import NodeBusyError, NotFoundError, PreconditionFailedError, TpuctlError
from tpuctl.models import Node
from tpuctl.services import jobs
from tpuctl.services.names import local_user
from tpuctl.services.run.spec import START_LEASE, Job


def _seconds(job: Job) -> float:
    """The lease's length: --start-lease, never longer than the start deadline."""
    seconds = float(job.spec.start_lease or START_LEASE)
    return min(seconds, float(job.spec.start_deadline or seconds))


def _claim_path(job: Job) -> str:
    return claims.claim_path(job.target.project, job.target.zone, job.node_name)


def _created(node: Node) -> str:
    return str(int(node.create_time.timestamp())) if node.create_time else ""


# -- the lease ------------------------------------------------------------------------------
def renew(job: Job, renewals: int = 0) -> None:
    """Write the job's lease once (a bucket that does not exist yet: nothing written)."""
    assert job.bucket is not None
    value = claims.lease(job.job_id, _seconds(job), renewals)
    job.bucket.write_json(claims.lease_path(job.job_id), value)


@contextlib.contextmanager
def renewing(job: Job) -> Iterator[None]:
    """Renew the job's lease in a daemon thread while the block runs (a SIGKILL ends it
    with the process; any other exit stops it here). The first lease is written before
    the block starts, the bucket made if need be: a client killed right after its create
    call has a lease its node's guard can see go stale. A client that ends deletes it."""
    stop = threading.Event()
    with contextlib.suppress(TpuctlError):  # no lease: the guard keeps to the deadline
        _server_now(job)

    def work() -> None:
        renewals = 1
        while not stop.wait(_seconds(job) / 3):
            with contextlib.suppress(TpuctlError):  # tried again at the next renewal
                renew(job, renewals)
                renewals += 1

    thread = threading.Thread(target=work, daemon=True, name="tpuctl-lease")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)  # no renewal after the lease is gone
        assert job.bucket is not None
        with contextlib.suppress(TpuctlError):  # the client has gone: no lease to see
            job.bucket.delete(claims.lease_path(job.job_id))


def _server_now(job: Job) -> float:
    """Cloud Storage's time now: when it says this job's lease was last written (written
    here first, the bucket made if it does not exist yet: staging would make it a moment
    later, and a concurrent make of the same bucket is harmless)."""
    assert job.bucket is not None
    try:
        renew(job)
    except NotFoundError:
        job.bucket.ensure(catalog.region_of(job.target.zone))
        renew(job)
    found = job.bucket.objects(claims.lease_path(job.job_id))
    return max((o.updated for o in found), default=0.0) or time.time()


# -- the claim ------------------------------------------------------------------------------
def _alive(job: Job, holder: str) -> str:
    """Why the job `holder` still holds its claim ('' when it is stale)."""
    assert job.bucket is not None
    now = _server_now(job)
    objects = {o.name: o for o in job.bucket.objects(protocol.job_prefix(holder))}
    lease_seconds = START_LEASE
    with contextlib.suppress(TpuctlError, ValueError, TypeError):
        lease_seconds = min(
            float(job.bucket.read_json(claims.lease_path(holder))[0]["seconds"]), claims.MAX_LEASE
        )
    lease = objects.get(claims.lease_path(holder))
    if lease is not None and now - lease.updated <= lease_seconds:
        return "its client is running"
    states = jobs.statuses(job.bucket, holder)
    beats = [o.updated for n, o in objects.items() if n.startswith(protocol.status_prefix(holder))]
    working = [s for s in states.values() if not protocol.is_final(s)]
    deadline = max(job.spec.heartbeat_deadline, lease_seconds)
    if working and beats and now - max(beats) <= deadline:
        return "its agents are running"
    # No lease and no agent: a client writes its lease before it takes a claim (`held`),
    # so this claim is stale, or was written by someone else than a client (the bucket is
    # shared): it holds nothing.
    return ""


def take(job: Job, node: Node) -> None:
    """Claim `node` for the job (again after a recreate: the claim names the new node),
    or refuse it with a NodeBusyError naming the job that holds it."""
    bucket = job.bucket
    if bucket is None or job.multislice:
        return
    path, created = _claim_path(job), _created(node)
    mine = claims.claim(job.job_id, created, local_user(), socket.gethostname())
    generation = 0  # only if absent
    for _ in range(5):
        try:
            job.claim = bucket.write_json(path, mine, if_generation_match=generation)
            return
        except PreconditionFailedError:
            pass
        except NotFoundError:  # the bucket: made, then written again
            bucket.ensure(catalog.region_of(job.target.zone))
            continue
        try:
            value, generation = bucket.read_json(path)
        except NotFoundError:
            generation = 0  # released meanwhile
            continue
        holder = claims.holder(value, created)
        if not holder or holder == job.job_id:
            continue  # an earlier node's claim, or this job's own: rewritten
        why = _alive(job, holder)
        if why:
            raise _busy(job, holder, value, why)
        job.ui.info(
            f"node {job.node_name}: the claim of job {holder} is stale "
            "(its job has ended or gone silent): taking it over"
        )
    raise PreconditionFailedError(f"the claim on node {job.node_name} kept changing; try again")


def _busy(job: Job, holder: str, value: dict[str, object], why: str) -> NodeBusyError:
    who = f"{value.get('user') or '?'} on {value.get('host') or '?'}"
    since = ""
    with contextlib.suppress(TypeError, ValueError):
        since = f" since {timestamps.utc_clock(float(str(value.get('claimed'))))}"
    return NodeBusyError(
        f"node {job.node_name} is busy: job {holder} of {who} holds it{since} ({why})",
        hint=f"wait for it (`tpuctl logs {holder} -f`), stop it (`tpuctl cancel {holder}`), "
        "or leave out --node to run on a node of the job's own",
    )


def claimed_by_other(job: Job, node: Node | None = None) -> tuple[str, str]:
    """The other job that holds the job's node, and why it still does (('', '') when none,
    or unknown). The claim is in the shared bucket: one that names a job which has ended
    or gone silent, or an earlier node of the name (`node`: the node as now), holds
    nothing, so a forged or stale claim never leaves the node billing."""
    if job.bucket is None or job.multislice:
        return "", ""
    path = _claim_path(job)
    try:
        value, _ = job.bucket.read_json(path)
        holder = claims.holder(value, _created(node) if node else "")
        if not holder or holder == job.job_id:
            return "", ""
        why = _alive(job, holder)
    except (TpuctlError, TypeError, ValueError, AttributeError):
        return "", ""
    return (holder, why) if why else ("", "")


def release(job: Job) -> None:
    """Give the claim up, unless the agents go on with the job without this client (they
    release it when it ends) or someone took it over (a generation of its own). Never
    raises: a claim left behind goes stale with its job."""
    if job.bucket is None or not job.claim:
        return
    try:
        if job.agents_started and (job.spec.detach or _working(job)):
            return
        job.bucket.delete(_claim_path(job), if_generation_match=job.claim)
    except (NotFoundError, PreconditionFailedError):
        pass
    except TpuctlError:
        return
    job.claim = None


def _working(job: Job) -> bool:
    """Does an agent still work on the current attempt?"""
    assert job.bucket is not None
    current = jobs.statuses(job.bucket, job.job_id).values()
    return any(not protocol.is_final(s) and s.get("attempt") == job.attempt for s in current)


@contextlib.contextmanager
def held(job: Job) -> Iterator[None]:
    """Around all of `run`: the lease renewed, the claim released on the way out."""
    with renewing(job):
        try:
            yield
        finally:
            release(job)
