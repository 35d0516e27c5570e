"""The job's node: find the one given with --node, or create one (directly or through a
queued resource) in the first of its zones that has capacity and quota for it, wait
until it is READY, and recreate it after a preemption (there, or in another zone).

`job.target.zone` is the zone in use: it changes only here, when a failover moves on,
and everything after (agents, watch, teardown, the job record) reads it."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence

from tpuctl import catalog
from tpuctl.agent.labels import expiry
from tpuctl.cloud.backend import TpuBackend
from tpuctl.config import shape_rule
from tpuctl.errors import NoCapacityError, NotFoundError, TpuctlError, UsageError
from tpuctl.models import (
    ATTEMPT_ATTRIBUTE,
    BUCKET_ATTRIBUTE,
    JOB,
    NODE_CREATE_FAILED,
    START_DEADLINE,
    CreateSpec,
    Node,
)
from tpuctl.services import cost, nodes, queued, staging, zones
from tpuctl.services.create import ask
from tpuctl.services.run import lease, teardown
from tpuctl.services.run.spec import Job
from tpuctl.waiting import retrying

RECREATE_PAUSE = (5.0, 300.0)  # first and longest pause while no capacity is free
# The last resort of a node made for a job, for `tpuctl gc` (--ttl overrides it): long
# enough for most training runs, short enough that a node nothing else deleted does not
# bill for more than a week.
JOB_NODE_TTL = 7 * 86400
# A node gone this close to its expiry went for it (the VM's clock and this one may
# differ by a little; its watchdog looks once a minute).
EXPIRY_SLACK = 120.0


def _node_spec(job: Job, attempt: int) -> CreateSpec:
    """The node for `attempt` of the job. With teardown, it guards itself from boot: no
    agent of `attempt` by the start deadline, and it deletes itself (agent/guard.py)."""
    guarded = job.spec.teardown and job.spec.start_deadline
    assert job.bucket is not None
    node = job.spec.node_spec  # as asked: a copy per attempt (a create fills in defaults)
    return dataclasses.replace(
        node,
        name=job.node_name,
        labels={**node.labels, JOB: job.job_id},
        metadata={BUCKET_ATTRIBUTE: job.bucket.name, ATTEMPT_ATTRIBUTE: str(attempt)},
        scopes=list(node.scopes),
        tags=list(node.tags),
        ttl=node.ttl or JOB_NODE_TTL,
        start_deadline=job.spec.start_deadline if guarded else None,
    )


def _queue(job: Job) -> queued.QueueOptions:
    spec = job.spec
    return queued.QueueOptions(
        valid_until=spec.valid_until,
        slices=spec.slices,
        flex_start=spec.flex_start,
        max_run_duration=spec.max_run_duration,
    )


def existing_node(job: Job) -> Node | None:
    """The READY node given with --node, claimed for the job (a NodeBusyError when another
    job holds it), or None when it is to be created."""
    if not job.spec.node:
        return None
    try:
        node = job.adapters.backend.get_node(job.full_name)
    except NotFoundError:
        return None
    if node.state != "READY":
        raise UsageError(
            f"node {node.name} is {node.state}, not READY",
            hint=f"start it (`tpuctl start {node.name}`) or pick another --node",
        )
    if job.spec.max_cost:
        raise UsageError(
            f"--max-cost caps a node the job creates, and node {node.name} exists",
            hint="a node's cap is set when it is made: `tpuctl create --max-cost` (or drop --node)",
        )
    lease.take(job, node)
    node = _label(job, node)
    job.node_labels = dict(node.labels)
    # what the node is, not what the run would have made: the job record, the receipt and
    # its price name the node's type (and a recreate after a preemption makes the same)
    job.spec.node_spec = dataclasses.replace(
        job.spec.node_spec,
        shape=node.slice,
        spot=node.spot,
        preemptible=node.preemptible,
        version=node.runtime_version or job.spec.node_spec.version,
    )
    return node


def _label(job: Job, node: Node) -> Node:
    """Label the node given with --node with the job (`tpuctl-job`), as a node made for a
    job is: `tpuctl stacks`, `profile` and `logs -f` open sessions only on a node whose
    label names the job (the record naming the node is in the shared bucket; the label
    is the cloud's). Set once the job holds the node's claim, so it names the job using
    the node now, and the next job on it sets its own. A start deadline goes with the
    old label: it was the boot guard of the job the node was made for (agent/guard.py),
    which would read this job's label with that job's bucket and attempt. One read and
    one write of the labels; where they cannot be written, the job runs and says so."""
    if node.labels.get(JOB) == job.job_id and START_DEADLINE not in node.labels:
        return node
    try:
        changes: dict[str, str | None] = {JOB: job.job_id, START_DEADLINE: None}
        return nodes.set_labels(job.adapters.backend, job.full_name, changes)
    except TpuctlError as e:
        job.ui.info(
            f"node {job.node_name}: its {JOB} label was not set ({e}): `tpuctl stacks`, "
            f"`profile` and `logs -f` will not reach job {job.job_id} on it"
        )
        return node


def create(job: Job, announce: bool = True, attempt: int | None = None) -> str | None:
    """Ask for the job's node (for `attempt`, default the current one); returns the create
    operation (None when queued or adopted).

    `job.created` turns true just before the call, so that every exit path from here on
    deletes what the call may have made."""
    a, spec = job.adapters, _node_spec(job, attempt or job.attempt)
    # the API's own rules (a flex-start VM or slice on Compute Engine: its wait)
    a.backend.check_request(spec, _queue(job), job.spec.queued)

    def made() -> None:
        job.created = True

    queue = _queue(job) if job.spec.queued else None
    say = job.ui.info if announce else None
    return ask(a.backend, a.quotas, job.target, spec, queue, say, before_call=made)


def wait_ready(job: Job, operation: str | None, then: str = "") -> Node:
    """The job's node once READY (multislice: slice 0, once every slice is READY).
    `then`: where the job goes next if this zone has no capacity in time."""
    a, label = job.adapters, f"{job.node_name} ({job.spec.shape.name}):"
    if job.multislice:
        label = f"{job.node_name} ({job.spec.slices} x {job.spec.shape.name}):"
    if job.spec.queued:
        # On Ctrl-C, timeout, FAILED or SUSPENDED the request is deleted there.
        options = _queue(job)
        plan = queued.plan(options, time.time(), then)
        with job.ui.progress(f"queued {label[:-1]} in {job.target.zone}:") as update:
            made = queued.provision_slices(
                a.backend,
                job.target,
                job.node_name,
                options,
                progress=queued.planned(update, plan),
            )
            return made[0]
    flex = job.spec.flex_start  # waits for capacity (Compute Engine): --timeout's default
    doing = "flex-start, waiting for capacity:" if flex else "creating"
    with job.ui.progress(f"{doing} {label}") as update:
        return nodes.wait_for_state(
            a.backend,
            job.full_name,
            {"READY"},
            operation=operation,
            fail_states=NODE_CREATE_FAILED,
            progress=update,
            **({"timeout": float(queued.DEFAULT_TIMEOUT)} if flex else {}),
        )


def survey_zones(job: Job) -> None:
    """Before the first create, when several zones were given: each zone's price and
    quota headroom on stderr; zones that cannot make the accelerator are dropped, saying
    why (none left: a UsageError). With --api auto, a zone either API offers it in stays
    (`places` tries each API there)."""
    t, spec, a = job.target, job.spec, job.adapters
    if len(t.candidates) < 2:
        return
    views = zones.survey(a.backend, a.quotas, t, spec.shape, spec.spot)
    for other in a.others:
        seen = {v.zone: v for v in zones.survey(other, a.quotas, t, spec.shape, spec.spot)}
        views = [seen[v.zone] if v.dropped and not seen[v.zone].dropped else v for v in views]
    kind = "spot" if spec.spot else "on-demand"
    job.ui.info(f"zones for {spec.shape.name} ({kind}), tried in this order ({cost.note()}):")
    for view in sorted(views, key=lambda v: bool(v.dropped)):
        job.ui.info(view.line())
    left = zones.usable(views, spec.shape.name)
    job.target = dataclasses.replace(t, zone=left[0], zones=tuple(left))


def places(job: Job, order: Sequence[str]) -> dict[str, tuple[TpuBackend, str]]:
    """Where to try, in order, by the name failover says: each zone, and with --api auto
    each API that offers the accelerator in it (the one chosen first, then the others in
    the registry's order: one zone's price and bucket region are the same on every API)."""
    a = job.adapters
    if not a.others:
        return {zone: (a.backend, zone) for zone in order}
    return {
        f"{zone} ({api.kind.title})": (api, zone)
        for zone in order
        for api in (a.backend, *a.others)
    }


def place(
    job: Job,
    on_created: Callable[[], None] = lambda: None,
    attempt: int | None = None,
    order: Sequence[str] | None = None,
) -> Node:
    """Create the job's node in the first zone of `order` (default: the job's zones) that
    takes it, and wait until it is READY. A zone out of capacity or quota is cleaned up
    and skipped, saying why; `on_created` runs after each create call (the first starts
    staging). Every zone refused: a ZonesExhausted (one zone: its own error)."""
    where = places(job, list(order or job.target.candidates))
    announce = attempt is None and len(where) == 1

    places_in_order = list(where)

    def one(place: str) -> Node:
        backend, zone = where[place]
        later = places_in_order[places_in_order.index(place) + 1 :]
        a = job.adapters
        if backend is not a.backend:  # --api auto: another API's turn
            a.others = tuple(x for x in (a.backend, *a.others) if x is not backend)
            a.backend = backend
        job.target = job.target.in_zone(zone)
        operation = create(job, announce=announce, attempt=attempt)
        on_created()
        node = wait_ready(job, operation, later[0] if later else "")
        lease.take(job, node)  # before any agent: `run --node` of another job is refused
        job.node_labels = dict(node.labels)
        return node

    def abandon(place: str) -> None:
        if job.created:  # what the refused create may have left there goes first
            teardown.teardown(job, wait_for_agent=0)
            job.created = job.torn_down = job.node_deleted = job.delete_asked = False

    what = f"{job.spec.shape.name} for job {job.job_id}"
    node = zones.failover(list(where), one, abandon, job.ui.info, what)
    if len(where) > 1:
        on = f" on {job.adapters.backend.kind.title}" if job.adapters.others else ""
        job.ui.info(f"{job.what} is in {job.target.zone}{on}")
    return node


def record_zone(job: Job) -> None:
    """The job record names the zone its node is in (a failover may have moved it from
    the zone the record was written with)."""
    bucket = job.bucket
    if bucket is None or not job.staging:
        return

    def change(value: dict[str, object] | None) -> dict[str, object] | None:
        if value is None or value.get("zone") == job.target.zone:
            return value
        return {**value, "zone": job.target.zone}

    bucket.update_json(staging.job_record_path(job.job_id), change)


def warn_cross_region(job: Job) -> None:
    """One line when the job's bucket sits in another region than its node: code, logs,
    outputs and checkpoints then cross regions (slower, and billed as egress). Multi-
    and dual-region buckets (US, EU, NAM4) are not flagged."""
    bucket = job.bucket
    location = (bucket.location or "").lower() if bucket is not None else ""
    region = catalog.region_of(job.target.zone)
    if bucket is None or not location or shape_rule("region", location) or location == region:
        return
    job.ui.info(
        f"warning: bucket gs://{bucket.name} is in {location}, the node in {region}: the "
        "job's code, logs and outputs cross regions (slower, billed as egress); "
        "--bucket gs://NAME picks a bucket in the node's region"
    )


def recreate(job: Job) -> Node:
    """Delete the lost node and create one with the same spec: in its zone first, then in
    the job's other zones, waiting while no zone has capacity (saying so); used-up quota
    everywhere, or any other refusal, ends the job."""
    a = job.adapters
    try:
        old = a.backend.get_node(job.full_name)
    except NotFoundError:
        pass
    else:
        result = nodes.delete_nodes(a.backend, [old])[0]
        if not result.ok and result.error is not None:
            raise result.error
    request = queued.qr_name(job.target, job.node_name)
    if job.multislice:  # every slice, and what is left of one (its names are taken else)
        queued.delete_slices(a.backend, request, job.slice_names, job.ui.info)
    elif job.spec.queued:
        queued.delete_request(a.backend, request)

    def tell(e: BaseException, pause: float) -> None:
        job.ui.info(f"{e}; trying again in {int(pause)}s")

    def no_capacity(e: BaseException) -> bool:
        if isinstance(e, zones.ZonesExhausted):
            return e.no_capacity
        return isinstance(e, NoCapacityError)

    here = job.target.zone
    order = [here, *(z for z in job.target.candidates if z != here)]
    first, longest = RECREATE_PAUSE
    for attempt in retrying(
        no_capacity, initial=first, maximum=longest, factor=2.0, before_sleep=tell
    ):
        with attempt:
            node = place(job, attempt=job.attempt + 1, order=order)
            if job.target.zone != here:
                record_zone(job)
                warn_cross_region(job)
            return node
    raise AssertionError("unreachable")  # pragma: no cover


def expired(job: Job) -> str:
    """What ended the job when its node went away at its expiry (its watchdog deleted it
    at the end of its --ttl or at its --max-cost deadline), '' otherwise; a node gone at
    its expiry is not recreated."""
    at, why = expiry(job.node_labels)
    if at is None or time.time() < at - EXPIRY_SLACK:
        return ""
    return f"{job.what} reached {why} and deleted itself"
