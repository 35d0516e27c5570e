"""`tpuctl create`: a node (or a multislice request's slices) asked for in the first zone
of the target that can make it, and waited for until READY (and, if asked, until SSH
answers on every worker).

The rules of the request are `CreateRequest.validate`'s; the one path from a checked spec
to a create call is `ask` (also `tpuctl run`'s, services/run/provision.py). Whatever a
create has asked for is the user's once the call is made: an interruption or a failure
after it names the node and how to delete it, and deletes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from tpuctl import interrupts
from tpuctl.durations import format_duration
from tpuctl.errors import Interrupted, NotFoundError, TpuctlError, UsageError
from tpuctl.models import COST_DEADLINE, EXPIRES, NODE_CREATE_FAILED, CreateSpec, Node, slice_ids
from tpuctl.queueing import check_slices
from tpuctl.services import cost, names, node_create, nodes, queued, zones
from tpuctl.services.queued import QueueOptions
from tpuctl.timestamps import utc_clock

if TYPE_CHECKING:
    from tpuctl.catalog import SliceShape
    from tpuctl.cloud.backend import TpuBackend
    from tpuctl.cloud.quota import QuotaApi
    from tpuctl.cloud.ssh import SshApi
    from tpuctl.config import Target
    from tpuctl.services.remote import WorkerResult

SSH_WAIT = 300.0  # seconds a fresh VM may take before SSH answers


class Ui(Protocol):
    """What a long use case tells the user as it goes (the CLI: stderr, spinners)."""

    def info(self, message: str) -> None: ...

    def progress(self, label: str) -> AbstractContextManager[Any]: ...


@dataclass
class CreateRequest:
    """What `tpuctl create` was asked, before any call."""

    spec: CreateSpec
    queued: bool = False  # through a queued resource
    queue: QueueOptions = field(default_factory=QueueOptions)
    wait: bool = True  # until READY (False: --no-wait)
    wait_ssh: bool = False  # and until SSH answers on every worker
    queue_flags: bool = False  # --valid-until, --valid-until-time, --keep-request or --timeout

    def validate(self, api: TpuBackend) -> None:
        """The request's own rules and those of the API it goes to; a UsageError naming
        the flag when one is broken."""
        check_slices(self.queue.slices)
        if self.queue.max_run_duration and not self.queue.flex_start:
            raise UsageError("--max-run-duration goes with --flex-start")
        if api.check_request(self.spec, self.queue, self.queued):
            return  # the API waits for capacity itself (a flex-start VM): no queued request
        # a multislice request is queued; so is flex-start on the TPU API, which offers it
        # through queued resources only (cloud.google.com/tpu/docs/request-using-flex-start)
        self.queued = self.queued or self.queue.slices > 1 or self.queue.flex_start
        if self.queue_flags and not self.queued:
            raise UsageError(
                "--valid-until, --valid-until-time, --keep-request and --timeout go with --queued"
            )
        if self.queue.flex_start:  # its flags refused before any call
            queued.queue_spec(self.spec, self.queue)
        if self.queue.slices > 1:  # every slice's name must be a node name too
            names.validate_name(slice_ids(self.spec.name, self.queue.slices)[-1])


@dataclass
class Adapters:
    backend: TpuBackend  # the API the create goes to
    quotas: QuotaApi | None
    ssh: Callable[[], SshApi]  # built only when SSH is waited for
    report_ssh: Callable[[list[WorkerResult]], int]  # says which workers failed; nonzero: some


@dataclass
class CreateOutcome:
    """What the create made: the READY node(s), or (not waited for) what was asked."""

    target: Target  # the zone it went to
    nodes: list[Node] = field(default_factory=list)
    operation: str | None = None  # not waited for, created directly
    started: bool = False  # not waited for


def choose_api(shape: SliceShape, asked: str | None, config: Mapping[str, Any]) -> str:
    """The TPU API a create goes to: the one asked for (--api); else the only one that
    offers the shape (TPU7x and later: Compute Engine; v5e and older: the TPU API), or
    claims a name tpuctl does not know; else, for a shape several offer (v6e, v5p), the
    config file's `api`, by default `registry.preferred` (the highest declared preference:
    the Cloud TPU API, which existing projects have quota for). A shape
    the chosen API does not offer is refused by the create's own check, naming the API
    that does."""
    from tpuctl.cloud import registry

    if asked:
        return asked
    offering = registry.offering(shape)
    if len(offering) == 1 or (offering and not shape.known):
        return offering[0].key  # the one that offers it, or claims an unknown name
    configured = config.get("api")
    return configured if configured in registry.known() else registry.preferred(shape).key


def price_line(spec: CreateSpec, slices: int = 1, zone: str = "") -> str | None:
    """`2 x v4-32 spot in us-central2: about $20.61/h (...)`; for a known shape with no
    price, says so; None for an unknown shape."""
    found = cost.rate(spec.shape, spec.spot or spec.preemptible, zone)
    what = f"{slices} x {spec.shape.name}" if slices > 1 else spec.shape.name
    kind = "spot" if spec.spot else "preemptible" if spec.preemptible else "on-demand"
    if found is None:
        if spec.shape.known and (spec.spot or spec.preemptible) and cost.rate(spec.shape, False):
            return f"{what} {kind}: price not known (no spot price for {spec.shape.generation})"
        return cost.unpriced([spec.shape.generation]) if spec.shape.known else None
    if spec.reserved:  # what a reservation costs is its own contract
        return f"{what} reserved: price not known (billed through the reservation)"
    price = cost.money(found.usd_per_hour * slices, per_hour=True)
    if spec.flex_start:  # the catalog has no flex-start TPU price: the on-demand one, said so
        kind = "flex-start (price not known; at the on-demand price)"
    where = cost.where(found, zone)
    return f"{what} {kind}{where}: about {price} ({cost.note()})"


def cap_line(prepared: CreateSpec, zone: str = "") -> str | None:
    """`max cost $50.00 ≈ 12h30m at $4.00/h: the node deletes itself at 21:30 UTC`, for
    a spec `node_create.prepare` labelled with a --max-cost (None without one)."""
    labels = prepared.labels
    if not prepared.max_cost or COST_DEADLINE not in labels:
        return None
    seconds, rate = cost.cap_seconds(
        prepared.shape, prepared.spot or prepared.preemptible, prepared.max_cost, zone
    )
    line = (
        f"max cost {cost.money(prepared.max_cost)} ≈ {format_duration(seconds)} at "
        f"{cost.money(rate, per_hour=True)}: the node deletes itself at "
        f"{utc_clock(float(labels[EXPIRES]))}"
    )
    if int(labels[EXPIRES]) < int(labels[COST_DEADLINE]):
        line += " (its --ttl ends before its max cost is reached)"
    return line


def ask(
    tpu: TpuBackend,
    quotas: QuotaApi | None,
    target: Target,
    spec: CreateSpec,
    queue: QueueOptions | None,
    say: Callable[[str], None] | None,
    before_call: Callable[[], None] = lambda: None,
) -> str | None:
    """Check `spec` as the API would, say its price (when `say`), and make the one create
    call: directly (the operation's name; None when a retried create adopted its node)
    or, with `queue`, through a queued resource (None). `before_call` runs just before
    the call, from when on the node may exist."""
    slices = queue.slices if queue else 1
    prepared = node_create.validate_create(tpu, target, spec, quotas, slices)
    line = price_line(spec, slices, target.zone)
    for said in (line, cap_line(prepared, target.zone)):
        if say is not None and said is not None:
            say(said)
    before_call()
    if queue is not None:
        queued.create_queued(tpu, target, spec.name, prepared, queue)
        return None
    return node_create.create_node(tpu, target, spec, prepared, quotas)


def create(a: Adapters, target: Target, request: CreateRequest, ui: Ui) -> CreateOutcome:
    """Make the node in the first zone of `target` that can (a survey of each zone's price
    and quota first when there are several), and wait for it as asked."""
    request.validate(a.backend)
    spec = request.spec
    with interrupts.alike():  # SIGTERM and SIGHUP as Ctrl-C; the create call is not cut
        order = list(target.candidates)
        if len(order) > 1:
            spot = spec.spot or spec.preemptible
            views = zones.survey(a.backend, a.quotas, target, spec.shape, spot)
            ui.info(f"zones for {spec.shape.name}, tried in this order ({cost.note()}):")
            for view in sorted(views, key=lambda v: bool(v.dropped)):
                ui.info(view.line())
            order = zones.usable(views, spec.shape.name)

        def then(zone: str) -> str:  # the zone tried next, if this one has no capacity
            later = order[order.index(zone) + 1 :]
            return later[0] if later else ""

        return zones.failover(
            order,
            lambda z: _create_in(
                a, target.in_zone(z), request, ui, announce=len(order) == 1, then=then(z)
            ),
            lambda z: zones.clear(a.backend, target.in_zone(z), spec.name, request.queued),
            ui.info,
            f"{spec.shape.name} node {spec.name}",
        )


def _create_in(
    a: Adapters, target: Target, request: CreateRequest, ui: Ui, announce: bool, then: str = ""
) -> CreateOutcome:
    spec, options = request.spec, request.queue
    name, zone = spec.name, target.zone
    made = False  # whether the node is known to exist (or asked for): then it is named
    sent = False  # whether a create was asked of the cloud: a refusal before names nothing
    ready = False  # whether it has been READY (a flex-start VM no longer waits)

    def asked() -> None:
        nonlocal made, sent
        made = sent = True

    try:
        if request.queued:
            # The queue's own functions delete the request on a failure or an interruption.
            prepared = node_create.validate_create(
                a.backend, target, spec, a.quotas, options.slices
            )
            for line in (
                price_line(spec, options.slices, zone),
                cap_line(prepared, zone),
            ):
                if announce and line:
                    ui.info(line)
            sent = True
            if not request.wait:
                queued.enqueue(a.backend, target, name, prepared, options)
                return CreateOutcome(target, started=True)
            slices = options.slices
            what = f"{slices} x {spec.shape.name}" if slices > 1 else spec.shape.name
            plan = queued.plan(options, time.time(), then)
            with ui.progress(f"queued {name} ({what}) in {zone}:") as update:
                made_nodes = queued.provision_slices(
                    a.backend,
                    target,
                    name,
                    options,
                    node_spec=prepared,
                    progress=queued.planned(update, plan),
                )
            made = True
            _wait_all_ssh(a, request, made_nodes, ui)
            return CreateOutcome(target, made_nodes)
        say = ui.info if announce else None
        operation = ask(a.backend, a.quotas, target, spec, None, say, asked)
        if not request.wait:
            return CreateOutcome(target, operation=operation, started=True)
        label = f"creating {name} ({spec.shape.name}) in {zone}:"
        if spec.flex_start:
            label = f"flex-start {name} ({spec.shape.name}) in {zone}, waiting for capacity:"
        with ui.progress(label) as update:
            node = nodes.wait_for_state(
                a.backend,
                f"{target.parent}/nodes/{name}",
                {"READY"},
                operation=operation,
                fail_states=NODE_CREATE_FAILED,
                progress=update,
                **({"timeout": float(options.timeout)} if spec.flex_start else {}),
            )
        ready = True
        _wait_all_ssh(a, request, [node], ui)
        return CreateOutcome(target, [node])
    except KeyboardInterrupt:
        if not made:
            raise
        if undone(a.backend, spec, options, ready):
            _undo(a, target, name, ui, "interrupted")
            raise Interrupted(f"interrupted; deleted what the create of {name} had made") from None
        # The node is the user's (they asked for it): say where it is, delete nothing.
        raise Interrupted(
            f"interrupted; node {name} exists in {zone} and may be billing",
            hint=f"delete it with `tpuctl delete {name} --zone {zone} --yes`",
        ) from None
    except TpuctlError as e:
        if made and undone(a.backend, spec, options, ready):
            _undo(a, target, name, ui, "failed")
            raise
        # A node that exists but never became ready may still bill: name it.
        if not e.hint and sent:
            e.hint = (
                f"if {name} still exists, delete it with `tpuctl delete {name} --zone {zone} --yes`"
            )
        raise


def undone(tpu: TpuBackend, spec: CreateSpec, options: QueueOptions, ready: bool) -> bool:
    """Whether a create that fails or is interrupted deletes what it made: a flex-start
    VM still waiting (not yet `ready`), as a queued request is, unless --keep-request; a
    slice of several resources."""
    if spec.flex_start and options.keep_request:
        return False
    if spec.flex_start and not ready:
        return True
    return not tpu.whole_at_once(spec.shape)


def _undo(a: Adapters, target: Target, name: str, ui: Ui, why: str) -> None:
    """Delete what an unfinished create of a slice made of several resources (a Compute
    Engine MIG, its template and policy: they are no node, and the VMs bill), or of a
    flex-start VM still waiting. A second interrupt leaves at once, naming what may be
    left."""
    zone = target.zone
    try:
        with ui.progress(f"the create {why}: deleting what it made of {name} in {zone}:"):
            try:
                node = a.backend.get_node(f"{target.parent}/nodes/{name}")
            except NotFoundError:
                return
            (result,) = nodes.delete_nodes(a.backend, [node])
    except KeyboardInterrupt:
        raise Interrupted(
            f"interrupted again; parts of {name} may be left in {zone}, and its VMs billing",
            hint=f"delete them with `tpuctl delete {name} --zone {zone} --yes`",
        ) from None
    if result.ok:
        ui.info(f"deleted {name} in {zone} ({a.backend.made_of(node.slice)})")
    else:
        ui.info(
            f"could not delete {name} in {zone}: {result.message}; "
            f"delete it with `tpuctl delete {name} --zone {zone} --yes`"
        )


def _wait_all_ssh(a: Adapters, request: CreateRequest, made: list[Node], ui: Ui) -> None:
    if request.wait_ssh:
        for node in made:
            wait_ssh(a, node, request.spec.internal_ip_only, ui)


def wait_ssh(a: Adapters, node: Node, internal_ip: bool, ui: Ui) -> None:
    """A node is ready for tpuctl once SSH answers on every worker."""
    from tpuctl.services import remote
    from tpuctl.services import ssh as ssh_service

    ssh_api = a.ssh()
    workers = len(node.workers)
    with ui.progress(f"waiting for SSH on {workers} worker(s) of {node.name}:") as update:
        update("connecting", 0.0)
        plan = ssh_service.plan(
            a.backend,
            ssh_api,
            node.full_name,
            "all",
            internal_ip,
            wait=SSH_WAIT,
            progress=lambda _, waited: update("host keys", waited),
        )
        update("connecting", 0.0)
        results = remote.wait_ssh(ssh_api, plan, timeout=SSH_WAIT)
    if a.report_ssh(results):
        raise TpuctlError(
            f"{node.name} is READY but SSH does not answer on every worker",
            hint=f"try `tpuctl ssh {node.name} --worker all --command true` in a minute",
        )
