"""Queued resources (Cloud TPU v2 `queuedResources`): requests that wait for capacity.

A request goes CREATING -> ACCEPTED (after the `queued_accept` duration) -> (after
`queued_schedule`) PROVISIONING when its zone has capacity for every node it asks for,
else WAITING_FOR_RESOURCES until capacity frees. While PROVISIONING its nodes are
ordinary nodes in their `create` transition; once all are READY the request is ACTIVE.
It FAILS when its `queueingPolicy` validity runs out first, when the nodes would exceed
quota, or when the control plane says so; it is SUSPENDED when its nodes are gone or
preempted. Like nodes, requests advance lazily on every call, on wall-clock deadlines.
"""

from __future__ import annotations

import dataclasses
import re
import secrets
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tpuctl.emulator import errors, rules
from tpuctl.emulator.errors import ApiError
from tpuctl.emulator.models import EMPTY_TYPE, Node, Operation, rfc3339

if TYPE_CHECKING:
    from tpuctl.emulator.backend import Backend

QR_TYPE = "type.googleapis.com/google.cloud.tpu.v2.QueuedResource"
DURATIONS: dict[str, float | None] = {"queued_accept": 0.5, "queued_schedule": 0.5}
# Without force, a delete is refused unless the request is in one of these (or has no node).
DELETABLE = frozenset({"ACCEPTED", "FAILED", "SUSPENDED"})
WAITING = frozenset({"CREATING", "ACCEPTED", "WAITING_FOR_RESOURCES"})
_DURATION_RE = re.compile(r"^(\d+(?:\.\d+)?)s$")


def parse_duration(value: Any, field_name: str) -> float:
    match = _DURATION_RE.match(str(value))
    if not match:
        raise errors.invalid_argument(
            f"Invalid value for field '{field_name}': '{value}' (a duration like '3600s')",
            field_name,
        )
    return float(match.group(1))


def parse_time(value: Any, field_name: str) -> float:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise errors.invalid_argument(
            f"Invalid value for field '{field_name}': '{value}' (an RFC 3339 time)", field_name
        ) from None


@dataclass
class QueuedResource:
    """One request and the nodes it asks for (built, with their addresses, when accepted)."""

    project: str
    zone: str
    qr_id: str
    create_time: float
    nodes: list[dict[str, Any]]  # Node.to_state() of each node to be, CREATING
    request: dict[str, Any]  # the fields echoed back: tpu, spot, guaranteed, ...
    state: str = "CREATING"
    initiator: str = "USER"
    error: dict[str, Any] | None = None
    deadline: float | None = None  # when the current step is due (None: held)
    valid_until: float | None = None
    valid_after: float | None = None
    forced: bool = False  # a forced delete under way

    @property
    def name(self) -> str:
        return f"projects/{self.project}/locations/{self.zone}/queuedResources/{self.qr_id}"

    def node_names(self) -> list[str]:
        return [Node.from_state(n).name for n in self.nodes]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "createTime": rfc3339(self.create_time),
            **self.request,
            "state": {"state": self.state, "stateInitiator": self.initiator},
        }
        if self.state == "FAILED" and self.error:
            out["state"]["failedData"] = {"error": dict(self.error)}
        return out

    def to_state(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_state(cls, data: dict[str, Any]) -> QueuedResource:
        return cls(**data)


@dataclass
class QueuedResources:
    """Every queued resource; the backend calls in under its lock."""

    items: dict[str, QueuedResource] = field(default_factory=dict)

    # -- the API ---------------------------------------------------------------
    def create(
        self, backend: Backend, project: str, zone: str, qr_id: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        rules.check_zone(project, zone, "tpu.queuedResources.create")
        if not qr_id or not rules.NODE_ID_RE.match(qr_id):
            raise errors.invalid_argument(
                f"Invalid value for field 'queuedResourceId': '{qr_id}'", "queued_resource_id"
            )
        name = f"projects/{project}/locations/{zone}/queuedResources/{qr_id}"
        if name in self.items:
            raise errors.already_exists(name)
        now = backend.now()
        nodes = self._nodes(backend, project, zone, body, now)
        policy = body.get("queueingPolicy") or {}
        qr = QueuedResource(project, zone, qr_id, now, [n.to_state() for n in nodes], {})
        qr.request = {
            k: body[k]
            for k in ("tpu", "spot", "guaranteed", "queueingPolicy", "reservationName")
            if k in body
        }
        if "validUntilDuration" in policy:
            qr.valid_until = now + parse_duration(policy["validUntilDuration"], "valid_until")
        if "validUntilTime" in policy:
            qr.valid_until = parse_time(policy["validUntilTime"], "valid_until_time")
        if "validAfterDuration" in policy:
            qr.valid_after = now + parse_duration(policy["validAfterDuration"], "valid_after")
        if "validAfterTime" in policy:
            qr.valid_after = parse_time(policy["validAfterTime"], "valid_after_time")
        qr.deadline = _after(now, backend.durations["queued_accept"])
        self.items[name] = qr
        op = _operation(qr, "create", now)
        self.step(backend, qr, now)
        op.response = {"@type": QR_TYPE, **qr.to_dict()}
        backend.add_operation(op)
        return op.to_dict()

    def _nodes(
        self, backend: Backend, project: str, zone: str, body: dict[str, Any], now: float
    ) -> list[Node]:
        specs = (body.get("tpu") or {}).get("nodeSpec") or []
        if not specs:
            raise errors.invalid_argument("tpu.nodeSpec is required.", "tpu.node_spec")
        out: list[Node] = []
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
            multi = spec.get("multisliceParams") or {}
            if multi:
                ids = [f"{multi.get('nodeIdPrefix')}-{i}" for i in range(int(multi["nodeCount"]))]
            else:
                ids = [str(spec.get("nodeId") or "")]
            for node_id in ids:
                node = rules.new_node(project, zone, node_id, node_body, now, backend.allocator)
                if node.name in backend.nodes or node.name in {n.name for n in out}:
                    raise errors.already_exists(node.name)
                out.append(node)
        return out

    def get(self, project: str, zone: str, qr_id: str) -> dict[str, Any]:
        return self._get(project, zone, qr_id, "tpu.queuedResources.get").to_dict()

    def _get(self, project: str, zone: str, qr_id: str, permission: str) -> QueuedResource:
        rules.check_zone(project, zone, permission)
        name = f"projects/{project}/locations/{zone}/queuedResources/{qr_id}"
        if name not in self.items:
            raise errors.not_found(name)
        return self.items[name]

    def list_page(self, project: str, zone: str, page_size: int, page_token: str) -> dict[str, Any]:
        rules.check_zone(project, zone, "tpu.queuedResources.list", any_zone=True)
        items = sorted(
            (q for q in self.items.values() if q.project == project and zone in ("-", q.zone)),
            key=lambda q: q.name,
        )
        page, token = rules.page(items, page_size, page_token)
        out: dict[str, Any] = {"queuedResources": [q.to_dict() for q in page], "unreachable": []}
        if token:
            out["nextPageToken"] = token
        return out

    def delete(
        self, backend: Backend, project: str, zone: str, qr_id: str, force: bool
    ) -> dict[str, Any]:
        qr = self._get(project, zone, qr_id, "tpu.queuedResources.delete")
        existing = [backend.nodes[n] for n in qr.node_names() if n in backend.nodes]
        if not force and existing and qr.state not in DELETABLE:
            raise errors.failed_precondition(
                f"Queued resource {qr.name} is in state {qr.state} and has nodes: delete "
                "them first, or pass force=true to delete them with it."
            )
        now = backend.now()
        for node in existing:  # the nodes go with the request
            if node.state != "DELETING":
                backend.begin_delete(node)
        qr.state, qr.deadline, qr.forced = "DELETING", None, force
        op = _operation(qr, "delete", now)
        backend.add_operation(op)
        # The operation is done at once; the request itself goes once its nodes are gone.
        op.done, op.end_time, op.response = True, now, {"@type": EMPTY_TYPE}
        self.step(backend, qr, now)
        return op.to_dict()

    # -- the clock ---------------------------------------------------------------
    def tick(self, backend: Backend, now: float) -> None:
        for qr in list(self.items.values()):
            self.step(backend, qr, now)

    def step(self, backend: Backend, qr: QueuedResource, now: float, force: bool = False) -> None:
        """Move `qr` on as far as it may go now (`force`: a held step is due too)."""
        before = qr.state
        while True:
            state = qr.state
            due = force or (qr.deadline is not None and qr.deadline <= now)
            if state in WAITING and qr.valid_until is not None and now >= qr.valid_until:
                self.fail(qr, 4, "The queued resource's validity ran out before capacity was found")
            elif state == "CREATING" and due:
                qr.state = "ACCEPTED"
                qr.deadline = _after(now, backend.durations["queued_schedule"])
            elif state in ("ACCEPTED", "WAITING_FOR_RESOURCES") and (
                (state == "WAITING_FOR_RESOURCES" or due)
                and (qr.valid_after is None or qr.valid_after <= now or force)
            ):
                self._try_provision(backend, qr, now, force)
            elif state in ("PROVISIONING", "ACTIVE"):
                self._follow_nodes(backend, qr)
            elif state == "DELETING" and not any(n in backend.nodes for n in qr.node_names()):
                del self.items[qr.name]
                backend.mark_dirty()
                return
            force = False
            if qr.state == state:
                break
        if qr.state != before:
            backend.mark_dirty()

    def _try_provision(self, backend: Backend, qr: QueuedResource, now: float, force: bool) -> None:
        nodes = [Node.from_state(n) for n in qr.nodes]
        admitted: list[Node] = []
        for node in nodes:
            node.create_time = now
            try:
                shortage = backend.quota.admit(node, [*backend.nodes.values(), *admitted])
            except ApiError as exc:
                self.fail(qr, errors.CODES.get(exc.status, 2), exc.message)
                return
            if shortage and not force:
                qr.state = "WAITING_FOR_RESOURCES"
                return
            admitted.append(node)
        qr.state = "PROVISIONING"
        for node in admitted:
            node.queued_resource = qr.name
            backend.nodes[node.name] = node
            backend.begin_create(node)

    def _follow_nodes(self, backend: Backend, qr: QueuedResource) -> None:
        nodes = [backend.nodes.get(n) for n in qr.node_names()]
        if all(n is None for n in nodes) or any(
            n is not None and n.state in ("PREEMPTED", "TERMINATED") for n in nodes
        ):
            qr.state, qr.initiator = "SUSPENDED", "SERVICE"
        elif qr.state == "PROVISIONING" and all(
            n is not None and n.state == "READY" for n in nodes
        ):
            qr.state = "ACTIVE"

    def fail(self, qr: QueuedResource, code: int, message: str) -> None:
        qr.state, qr.initiator, qr.deadline = "FAILED", "SERVICE", None
        qr.error = {"code": code, "message": message}

    # -- control plane -------------------------------------------------------------
    def control(
        self, backend: Backend, action: str, name: str, message: str | None
    ) -> dict[str, Any]:
        """Fail, suspend or provision (ignoring capacity) the request `name` now."""
        if name not in self.items:
            raise errors.not_found(name)
        qr = self.items[name]
        if action == "fail":
            self.fail(qr, errors.CODES["RESOURCE_EXHAUSTED"], message or "Failed.")
        elif action == "suspend":
            qr.state, qr.initiator = "SUSPENDED", "SERVICE"
        elif action == "provision":
            if qr.state not in WAITING:
                raise errors.failed_precondition(f"{name} is {qr.state}: nothing to provision")
            qr.state = "ACCEPTED"
            self.step(backend, qr, backend.now(), force=True)
        else:
            raise errors.invalid_argument(f"unknown action '{action}'")
        backend.mark_dirty()
        return qr.to_dict()

    def to_state(self) -> list[dict[str, Any]]:
        return [q.to_state() for q in self.items.values()]

    def load(self, items: list[dict[str, Any]]) -> None:
        self.items = {q.name: q for q in map(QueuedResource.from_state, items)}


def _after(now: float, duration: float | None) -> float | None:
    return None if duration is None else now + duration


def _operation(qr: QueuedResource, verb: str, now: float) -> Operation:
    suffix = f"{secrets.token_hex(7)[:13]}-{secrets.token_hex(4)}-{secrets.token_hex(4)}"
    op = Operation(qr.project, qr.zone, f"operation-{int(now * 1000)}-{suffix}", verb, qr.name, now)
    if verb == "create":
        op.done, op.end_time = True, now
    return op
