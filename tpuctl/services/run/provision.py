"""The job's node: find the one given with --node, or create one (directly or through a
queued resource), wait until it is READY, and recreate it after a preemption."""

from __future__ import annotations

from tpuctl import catalog
from tpuctl.errors import NoCapacityError, NotFoundError, UsageError
from tpuctl.models import ATTEMPT_ATTRIBUTE, BUCKET_ATTRIBUTE, JOB, Node
from tpuctl.services import cost, nodes, queued
from tpuctl.services.run.spec import Job
from tpuctl.waiting import retrying

RECREATE_PAUSE = (5.0, 300.0)  # first and longest pause while no capacity is free
# The last resort of a node made for a job, for `tpuctl gc` (--ttl overrides it): long
# enough for most training runs, short enough that a node nothing else deleted does not
# bill for more than a week.
JOB_NODE_TTL = 7 * 86400


def workers_of(accelerator: str) -> int:
    acc = catalog.parse_accelerator(accelerator)
    return acc.workers if acc else 1


def _node_spec(job: Job, attempt: int) -> nodes.CreateSpec:
    """The node for `attempt` of the job. With teardown, it guards itself from boot: no
    agent of `attempt` by the start deadline, and it deletes itself (agent/guard.py)."""
    guarded = job.spec.teardown and job.spec.start_deadline
    assert job.bucket is not None
    return nodes.CreateSpec(
        name=job.node_name,
        accelerator=job.spec.accelerator,
        version=job.spec.version,
        spot=job.spec.spot,
        labels={JOB: job.job_id},
        metadata={BUCKET_ATTRIBUTE: job.bucket.name, ATTEMPT_ATTRIBUTE: str(attempt)},
        ttl=job.spec.ttl or JOB_NODE_TTL,
        idle_timeout=job.spec.idle_timeout,
        start_deadline=job.spec.start_deadline if guarded else None,
    )


def _queue(job: Job) -> queued.QueueOptions:
    return queued.QueueOptions(valid_until=job.spec.valid_until)


def existing_node(job: Job) -> Node | None:
    """The READY node given with --node, or None when it is to be created."""
    if not job.spec.node:
        return None
    try:
        node = job.adapters.tpu.get_node(job.full_name)
    except NotFoundError:
        return None
    if node.state != "READY":
        raise UsageError(
            f"node {node.name} is {node.state}, not READY",
            hint=f"start it (`tpuctl start {node.name}`) or pick another --node",
        )
    return node


def create(job: Job, announce: bool = True, attempt: int | None = None) -> str | None:
    """Ask for the job's node (for `attempt`, default the current one); returns the create
    operation (None when queued or adopted).

    `job.created` turns true just before the call, so that every exit path from here on
    deletes what the call may have made."""
    a, spec = job.adapters, _node_spec(job, attempt or job.attempt)
    body = nodes.validate_create(a.tpu, job.target, spec, a.quotas)
    rate = cost.hourly(spec.accelerator, spec.spot)
    if announce and rate is not None:
        kind = "spot" if spec.spot else "on-demand"
        job.ui.info(
            f"{spec.accelerator} {kind}: about {cost.money(rate, per_hour=True)} ({cost.note()})"
        )
    job.created = True
    if job.spec.queued:
        queued.create_queued(a.tpu, job.target, job.node_name, body, _queue(job))
        return None
    return nodes.create_node(a.tpu, job.target, spec, body, a.quotas)


def wait_ready(job: Job, operation: str | None) -> Node:
    a, label = job.adapters, f"{job.node_name} ({job.spec.accelerator}):"
    if job.spec.queued:
        # On Ctrl-C, timeout, FAILED or SUSPENDED the request is deleted there.
        with job.ui.progress(f"queued {label}") as update:
            return queued.provision(a.tpu, job.target, job.node_name, _queue(job), progress=update)
    with job.ui.progress(f"creating {label}") as update:
        return nodes.wait_for_state(
            a.tpu,
            job.full_name,
            {"READY"},
            operation=operation,
            fail_states=nodes.FAILED_CREATE_STATES,
            progress=update,
        )


def recreate(job: Job) -> Node:
    """Delete the lost node and create one with the same spec, waiting while the zone
    has no capacity (saying so); a used-up quota or any other refusal ends the job."""
    a = job.adapters
    try:
        old = a.tpu.get_node(job.full_name)
    except NotFoundError:
        pass
    else:
        result = nodes.delete_nodes(a.tpu, [old])[0]
        if not result.ok and result.error is not None:
            raise result.error
    if job.spec.queued:
        queued.delete_request(a.tpu, queued.qr_name(job.target, job.node_name))

    def tell(e: BaseException, pause: float) -> None:
        job.ui.info(f"{e}; trying again in {int(pause)}s")

    first, longest = RECREATE_PAUSE
    for attempt in retrying(
        lambda e: isinstance(e, NoCapacityError),
        initial=first,
        maximum=longest,
        factor=2.0,
        before_sleep=tell,
    ):
        with attempt:
            return wait_ready(job, create(job, announce=False, attempt=job.attempt + 1))
    raise AssertionError("unreachable")  # pragma: no cover
