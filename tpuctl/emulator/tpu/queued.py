"""Queued resources (Cloud TPU v2 `queuedResources`): requests that wait for capacity.

A request goes CREATING -> ACCEPTED (after the `queued_accept` duration) -> (after
`queued_schedule`) PROVISIONING when its zone has capacity for every node it asks for,
else WAITING_FOR_RESOURCES until capacity frees. While PROVISIONING its nodes are
ordinary nodes in their `create` transition; once all are READY the request is ACTIVE.
It FAILS when its `queueingPolicy` validity runs out first, when the nodes would exceed
quota, or when the control plane says so; it is SUSPENDED when its nodes are gone or
preempted. Like nodes, requests advance on wall-clock deadlines: on every call and on
the server's ticker, each step as of when it fell due (see `step`).
"""

from __future__ import annotations

import re
from typing import Any

from tpuctl.emulator.core import errors
from tpuctl.emulator.core.errors import ApiError
from tpuctl.emulator.core.state import State
from tpuctl.emulator.core.timestamps import proto_timestamp
from tpuctl.emulator.offerings import quotas as offered
from tpuctl.emulator.quotas.limits import node_scheduling
from tpuctl.emulator.tpu import flex, rules
from tpuctl.emulator.tpu import nodes as tpu_nodes
from tpuctl.emulator.tpu.models import Node, Operation, Page, QueuedResource

# Without force, a delete is refused unless the request is in one of these (or has no node).
DELETABLE = frozenset({"ACCEPTED", "FAILED", "SUSPENDED"})
WAITING = frozenset({"CREATING", "ACCEPTED", "WAITING_FOR_RESOURCES"})
# The discovery document's pattern for a multislice node id prefix (MultisliceParams).
MULTISLICE_PREFIX_RE = re.compile(r"^[A-Za-z0-9_.~+%-]+$")
parse_duration, parse_time = rules.parse_duration, rules.parse_time


# -- the API -------------------------------------------------------------------
def create(
    state: State,
    project: str,
    zone: str,
    qr_id: str,
    body: dict[str, Any],
    alpha: dict[str, Any] | None = None,
) -> Operation:
    """`alpha`: the v2alpha1 fields v2 lacks (`flex.ALPHA_FIELDS`), when v2alpha1 asks."""
    rules.check_zone(project, zone, "tpu.queuedResources.create")
    if not qr_id or not rules.NODE_ID_RE.match(qr_id):
        raise errors.invalid_argument(
            f"Invalid value for field 'queuedResourceId': '{qr_id}'", "queued_resource_id"
        )
    body = rules.check_fields("QueuedResource", body, "queued_resource")
    specs = (body.get("tpu") or {}).get("nodeSpec") or []
    state.policies.check_create(
        project, zone, [s.get("node") or {} for s in specs], "a TPU queued resource"
    )
    name = f"projects/{project}/locations/{zone}/queuedResources/{qr_id}"
    if name in state.queued:
        raise errors.already_exists(name)
    now = state.now()
    if not body.get("reservationName"):
        # proto3 JSON: a string at its default is unset; google-cloud-tpu's REST client
        # sends `reservationName: ""` for a request that names no reservation.
        body.pop("reservationName", None)
    else:
        _check_reservation(body["reservationName"], zone)
    nodes = _nodes(state, project, zone, qr_id, body, now)
    qr = QueuedResource(project, zone, qr_id, now, [n.to_state() for n in nodes], {})
    qr.request = {
        k: body[k]
        for k in ("tpu", "spot", "guaranteed", "queueingPolicy", "reservationName")
        if k in body
    }
    if "queueingPolicy" in body:
        qr.request["queueingPolicy"] = _policy(qr, body["queueingPolicy"] or {}, now)
    qr.alpha = flex.check(alpha or {})
    qr.deadline = _after(now, state.durations["queued_accept"])
    state.queued[name] = qr
    op = Operation.new(project, zone, name, "create", now)
    step(state, qr, now)
    op.succeed(now, qr)  # done at once: the request is made, whether or not it is served
    tpu_nodes.add_operation(state, op)
    return op


_RESERVATION_RE = re.compile(
    r"(?:projects|folders|organizations)/[^/]+/locations/(?P<zone>[^/]+)/reservations/[^/]+"
)


def _check_reservation(value: Any, zone: str) -> None:
    """A reservation name as gcloud sends it (`projects/P/locations/Z/reservations/-`, or a
    reservation's own name): one in the request's zone. The wording is the emulator's."""
    match = _RESERVATION_RE.fullmatch(str(value))
    if match is None:
        raise errors.invalid_argument(
            f"Invalid value for field 'reservationName': '{value}' (expected "
            "projects/P/locations/ZONE/reservations/NAME or .../reservations/-)",
            "reservation_name",
        )
    if match["zone"] != zone:
        raise errors.invalid_argument(
            f"reservationName {value} is not in the queued resource's zone {zone}",
            "reservation_name",
        )


def _policy(qr: QueuedResource, policy: dict[str, Any], now: float) -> dict[str, Any]:
    """Read the validity window into `qr`; the policy as the API answers it. The
    durations share oneofs with the times (`start_timing`, `end_timing` in
    google/cloud/tpu/v2/cloud_tpu.proto), and the service resolves a duration into the
    time it ends at: a request sent with `validUntilDuration` comes back with
    `validUntilTime` (python-docs-samples' tpu/ queued-resource samples print it)."""
    out = dict(policy)
    interval = policy.get("validInterval") or {}
    for kind, field_name in (("Until", "endTime"), ("After", "startTime")):
        duration, time_key = f"valid{kind}Duration", f"valid{kind}Time"
        at: float | None = None
        if duration in policy:
            at = now + parse_duration(policy[duration], f"valid_{kind.lower()}_duration")
            del out[duration]
            out[time_key] = proto_timestamp(at)  # a Timestamp, as the API writes it
        elif time_key in policy:
            at = parse_time(policy[time_key], f"valid_{kind.lower()}_time")
        elif field_name in interval:
            at = parse_time(interval[field_name], f"valid_interval.{field_name}")
        if kind == "Until":
            qr.valid_until = at
        else:
            qr.valid_after = at
    return out


def _nodes(
    state: State, project: str, zone: str, qr_id: str, body: dict[str, Any], now: float
) -> list[Node]:
    specs = (body.get("tpu") or {}).get("nodeSpec") or []
    if not specs:
        raise errors.invalid_argument("tpu.nodeSpec is required.", "tpu.node_spec")
    out: list[Node] = []
    seen: set[str] = set()  # the names so far: a multislice of N nodes is checked in O(N)
    for spec in specs:
        parent = str(spec.get("parent") or f"projects/{project}/locations/{zone}")
        if parent != f"projects/{project}/locations/{zone}":
            raise errors.invalid_argument(
                f"nodeSpec.parent {parent} must be the queued resource's location",
                "tpu.node_spec.parent",
            )
        node_body = dict(spec.get("node") or {})
        if "spot" in body:
            sched = dict(node_body.get("schedulingConfig") or {})
            node_body["schedulingConfig"] = {**sched, "spot": True}
        if "reservationName" in body:  # the node runs on the reservation
            sched = dict(node_body.get("schedulingConfig") or {})
            node_body["schedulingConfig"] = {**sched, "reserved": True}
        multi = spec.get("multisliceParams") or {}
        ids = _node_ids(spec, multi, qr_id)
        for i, node_id in enumerate(ids):
            node = rules.new_node(project, zone, node_id, node_body, now, state.allocator)
            if i == 0 and len(ids) > 1:
                _check_whole(state, node, len(ids))
            node.multislice_node = bool(multi)  # `multisliceNode`: output only
            if node.name in state.nodes or node.name in seen:
                raise errors.already_exists(node.name)
            seen.add(node.name)
            out.append(node)
    return out


def _check_whole(state: State, node: Node, count: int) -> None:
    """A multislice whose `count` nodes together exceed a quota's limit, whatever else is
    in use, can never be served: refused at create with the quota error (429) before its
    nodes are built, so that a count of 100000 costs one check, not 100000 nodes made
    while the lock is held (the emulator's own bound: the API documents none)."""
    acc = node.accelerator
    over = []
    specs = offered.quotas_for(acc, node_scheduling(node))
    for spec in sorted(specs, key=lambda q: q.dimension != "region"):  # regions first
        location = spec.location(node.zone)
        limit = state.quota.limit(spec.quota_id, location)
        if spec.amount(acc) * count > limit:
            over.append((spec.quota_id, limit, spec.dimension, location))
    if over:
        raise errors.quotas_exceeded(node.project, over)


def _node_ids(spec: dict[str, Any], multi: dict[str, Any], qr_id: str) -> list[str]:
    """The node ids one node spec asks for. A multislice spec (`multisliceParams`, v2;
    `multiNodeParams` in v2alpha1) names `nodeCount` nodes `<prefix>-0` ... `<prefix>-N-1`,
    the prefix defaulting to the request's id; it replaces `nodeId` (never both), and its
    count "needs to be > 1" (google/cloud/tpu/v2/cloud_tpu.proto, MultisliceParams;
    gcloud's `--node-count` is in a mutex group with `--node-id` and refuses counts <= 1:
    surface/compute/tpus/queued_resources/create.yaml, command_lib/.../util.py)."""
    if not multi:
        return [str(spec.get("nodeId") or "")]
    if spec.get("nodeId"):
        raise errors.invalid_argument(
            "nodeSpec.nodeId and nodeSpec.multisliceParams are mutually exclusive: give one",
            "tpu.node_spec.node_id",
        )
    try:
        count = int(multi.get("nodeCount") or 0)
    except (TypeError, ValueError):
        count = 0
    if count <= 1:
        raise errors.invalid_argument(
            f"Invalid value for field 'multisliceParams.nodeCount': "
            f"'{multi.get('nodeCount')}' (it needs to be > 1)",
            "tpu.node_spec.multislice_params.node_count",
        )
    prefix = str(multi.get("nodeIdPrefix") or qr_id)
    if not MULTISLICE_PREFIX_RE.match(prefix):
        raise errors.invalid_argument(
            f"Invalid value for field 'multisliceParams.nodeIdPrefix': '{prefix}'",
            "tpu.node_spec.multislice_params.node_id_prefix",
        )
    return [f"{prefix}-{i}" for i in range(count)]


def get(state: State, project: str, zone: str, qr_id: str) -> QueuedResource:
    return _get(state, project, zone, qr_id, "tpu.queuedResources.get")


def _get(state: State, project: str, zone: str, qr_id: str, permission: str) -> QueuedResource:
    rules.check_zone(project, zone, permission)
    name = f"projects/{project}/locations/{zone}/queuedResources/{qr_id}"
    if name not in state.queued:
        raise errors.not_found(name)
    return state.queued[name]


def list_page(state: State, project: str, zone: str, page_size: int, page_token: str) -> Page:
    rules.check_zone(project, zone, "tpu.queuedResources.list", any_zone=True)
    items = rules.in_location(state.queued.values(), project, zone)
    return Page(*rules.page(items, page_size, page_token))


def delete(state: State, project: str, zone: str, qr_id: str, force: bool) -> Operation:
    qr = _get(state, project, zone, qr_id, "tpu.queuedResources.delete")
    existing = [state.nodes[n] for n in qr.node_names() if n in state.nodes]
    if not force and existing and qr.state not in DELETABLE:
        raise errors.failed_precondition(
            f"Queued resource {qr.name} is in state {qr.state} and has nodes: delete "
            "them first, or pass force=true to delete them with it."
        )
    now = state.now()
    for node in existing:  # the nodes go with the request
        if node.state != "DELETING":
            tpu_nodes.begin(state, node, "delete")
    qr.state, qr.deadline, qr.forced = "DELETING", None, force
    op = Operation.new(qr.project, qr.zone, qr.name, "delete", now)
    tpu_nodes.add_operation(state, op)
    # The operation is done at once; the request itself goes once its nodes are gone.
    op.succeed(now, None)
    step(state, qr, now)
    return op


def all_requests(state: State) -> list[QueuedResource]:
    """Every request of every project and zone (the control plane's view)."""
    return sorted(state.queued.values(), key=lambda q: q.name)


# -- the clock ---------------------------------------------------------------------
def tick(state: State, now: float) -> None:
    for qr in list(state.queued.values()):
        step(state, qr, now)


def step(state: State, qr: QueuedResource, now: float, force: bool = False) -> None:
    """Move `qr` on as far as the clock says it has gone by `now` (`force`: a held step
    is due now). Each step happens at the time it fell due, so one late look walks
    every step a poller would have seen, in the same order."""
    before = qr.state
    while True:
        current = qr.state
        at = _due_at(qr, now, force)
        until = qr.valid_until  # ran out before the next step fell due?
        expired = until is not None and until <= now and (at is None or until <= at)
        if current in WAITING and expired:
            _fail(qr, 4, "The queued resource's validity ran out before capacity was found")
        elif current == "CREATING" and at is not None:
            qr.state = "ACCEPTED"
            qr.deadline = _after(at, state.durations["queued_schedule"])
        elif current in ("ACCEPTED", "WAITING_FOR_RESOURCES") and at is not None:
            _try_provision(state, qr, at, force)
        elif current in ("PROVISIONING", "ACTIVE"):
            _end_run(state, qr, now)
            _follow_nodes(state, qr)
        elif current == "DELETING" and not any(n in state.nodes for n in qr.node_names()):
            del state.queued[qr.name]
            state.changed()
            return
        force = False
        if qr.state == current:
            break
    if qr.state != before:
        state.changed()


def _due_at(qr: QueuedResource, now: float, force: bool) -> float | None:
    """When the request's next timed step fell due, if it has by `now`."""
    if force:
        return now
    if qr.state == "WAITING_FOR_RESOURCES":
        return now  # capacity is looked for whenever the clock moves
    if qr.state not in ("CREATING", "ACCEPTED") or qr.deadline is None:
        return None
    at = qr.deadline
    if qr.state == "ACCEPTED" and qr.valid_after is not None:
        at = max(at, qr.valid_after)
    return at if at <= now else None


def _try_provision(state: State, qr: QueuedResource, now: float, force: bool) -> None:
    nodes = [Node.from_state(n) for n in qr.nodes]
    admitted: list[Node] = []
    for node in nodes:
        node.create_time = now
        try:
            held = state.compute.chips_in_use(node.zone, node.accelerator.generation)
            shortage = state.quota.admit(node, [*state.nodes.values(), *admitted], held)
        except ApiError as exc:
            _fail(qr, errors.CODES.get(exc.status, 2), exc.message)
            return
        if shortage and not force:
            qr.state = "WAITING_FOR_RESOURCES"
            return
        admitted.append(node)
    qr.state = "PROVISIONING"
    qr.run_ends = flex.ends_at(qr.alpha, now)
    for node in admitted:
        node.queued_resource = qr.name
        node.terminate_at = qr.run_ends
        state.nodes[node.name] = node
        tpu_nodes.begin(state, node, "create", at=now)


def _end_run(state: State, qr: QueuedResource, now: float) -> None:
    """At the end of its run duration a request's nodes are deleted (`flex`); with its
    nodes gone, the request is SUSPENDED (`_follow_nodes`)."""
    if qr.run_ends is None or qr.run_ends > now:
        return
    for name in qr.node_names():
        node = state.nodes.get(name)
        if node is not None and node.state != "DELETING":
            tpu_nodes.begin(state, node, "delete", at=qr.run_ends)
    qr.run_ends = None


def _follow_nodes(state: State, qr: QueuedResource) -> None:
    nodes = [state.nodes.get(n) for n in qr.node_names()]
    if all(n is None for n in nodes) or any(
        n is not None and n.state in ("PREEMPTED", "TERMINATED") for n in nodes
    ):
        qr.state, qr.initiator = "SUSPENDED", "SERVICE"
    elif qr.state == "PROVISIONING" and all(n is not None and n.state == "READY" for n in nodes):
        qr.state = "ACTIVE"


def _fail(qr: QueuedResource, code: int, message: str) -> None:
    qr.state, qr.initiator, qr.deadline = "FAILED", "SERVICE", None
    qr.error = {"code": code, "message": message}


# -- control plane -----------------------------------------------------------------
def control(state: State, action: str, name: str, message: str | None) -> QueuedResource:
    """Fail, suspend (SUSPENDED, or SUSPENDING: held there until suspended) or provision
    (ignoring capacity) the request `name` now."""
    if name not in state.queued:
        raise errors.not_found(name)
    qr = state.queued[name]
    if action == "fail":
        _fail(qr, errors.CODES["RESOURCE_EXHAUSTED"], message or "Failed.")
    elif action in ("suspend", "suspending"):
        qr.state = "SUSPENDED" if action == "suspend" else "SUSPENDING"
        qr.initiator, qr.deadline = "SERVICE", None
    elif action == "provision":
        if qr.state not in WAITING:
            raise errors.failed_precondition(f"{name} is {qr.state}: nothing to provision")
        qr.state = "ACCEPTED"
        step(state, qr, state.now(), force=True)
    else:
        raise errors.invalid_argument(f"unknown action '{action}'")
    state.changed()
    return qr


def advance(state: State, now: float) -> list[str]:
    """Make every held step due now (the control plane's `advance`); the names moved."""
    done = []
    for qr in list(state.queued.values()):
        if qr.state in ("CREATING", "ACCEPTED"):
            done.append(qr.name)
            qr.deadline = now
            step(state, qr, now)
    return done


def _after(now: float, duration: float | None) -> float | None:
    return None if duration is None else now + duration
