"""Compute Engine's TPU VM instances and zone operations as state, and their transitions
as data.

Invariants:
- An instance's status follows its transition and the clock alone: while `create` or
  `start` runs it is PROVISIONING for the first half of the duration and STAGING for
  the second, then RUNNING; `stop` shows STOPPING, then TERMINATED; `delete` shows
  STOPPING, then the instance is gone. The durations are the TPU nodes' (`create`,
  `start`, `stop`, `delete` of the emulator's config), so a test's instant transitions
  hold for both.
- A flex-start VM that finds no capacity is PENDING, with no transition, until capacity
  frees (its create then begins) or its `pending_until` passes (its insert fails, and it
  is gone); a group's PENDING VMs begin together, when there is room for all of them.
- An operation is RUNNING until its instance's transition completes, then DONE (with
  `error` when it failed); the state of a DONE operation never changes again.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from dataclasses import asdict, dataclass, field
from typing import Any

from tpuctl.emulator.compute.group_models import Group, Policy, Reservation, Template

# verb -> (status while it runs (first half, second half), status after; None: gone)
TRANSITIONS: dict[str, tuple[tuple[str, str], str | None]] = {
    "create": (("PROVISIONING", "STAGING"), "RUNNING"),
    "start": (("PROVISIONING", "STAGING"), "RUNNING"),
    "stop": (("STOPPING", "STOPPING"), "TERMINATED"),
    "delete": (("STOPPING", "STOPPING"), None),
}
# what each verb may start from (Compute refuses start of a RUNNING instance, ...)
ALLOWED_FROM = {
    "stop": {"RUNNING", "PROVISIONING", "STAGING"},
    "start": {"TERMINATED"},
}


def fingerprint(value: Any) -> str:
    """A Compute fingerprint: 8 bytes, base64 (`42WmSpB8rSM=`), of the value it guards."""
    digest = hashlib.sha256(json.dumps(value, sort_keys=True).encode()).digest()
    return base64.b64encode(digest[:8]).decode()


def _uid() -> str:
    return str(secrets.randbits(63))  # Compute's ids are uint64, written as strings


@dataclass
class Instance:
    project: str
    zone: str
    name: str
    machine_type: str
    generation: str
    chips: int
    body: dict[str, Any]  # what was asked for (disks, networkInterfaces, ...), normalised
    created: float
    address: str
    labels: dict[str, str] = field(default_factory=dict)
    status: str = "PROVISIONING"
    transition: str | None = "create"
    started: float | None = None  # when the transition began
    deadline: float | None = None  # when it completes
    capacity_error: str | None = None  # a create or start that will fail: no capacity
    quota_error: dict[str, Any] | None = None  # ... or over quota (its operation's error)
    hostkeys_at: float | None = None  # when the guest publishes its SSH host keys
    host_key: str = field(default_factory=lambda: _ed25519_blob())
    uid: str = field(default_factory=_uid)
    last_start: float | None = None
    last_stop: float | None = None
    group: str | None = None  # the managed instance group that made it (its path)
    published: list[dict[str, str]] = field(default_factory=list)  # guest attributes (hostkeys/)
    # a flex-start VM waiting for capacity (status PENDING): until when its insert waits
    # (None: as long as its group does)
    pending_until: float | None = None
    preempted_at: float | None = None  # when a preemption's notice began (spot)
    preempt_ends: float | None = None  # ... and when it ends the VM
    reservation: str | None = None  # the path of the reservation it consumes
    # a host maintenance announced (core/maintenance.py's record; compute/maintenance.py)
    maintenance: dict[str, Any] | None = None

    @property
    def path(self) -> str:
        return f"projects/{self.project}/zones/{self.zone}/instances/{self.name}"

    @property
    def label_fingerprint(self) -> str:
        return fingerprint(self.labels)

    @property
    def preemptible(self) -> bool:
        """Whether it counts against preemptible quota: spot, flex-start, preemptible."""
        sched = self.body.get("scheduling") or {}
        return sched.get("provisioningModel") in ("SPOT", "FLEX_START") or bool(
            sched.get("preemptible")
        )

    @property
    def metadata_fingerprint(self) -> str:
        return fingerprint(self.body.get("metadata", {}))

    def metadata_value(self, key: str) -> str | None:
        for item in self.body.get("metadata", {}).get("items", []):
            if item.get("key") == key:
                return str(item.get("value", ""))
        return None

    def ends_at(self) -> float | None:
        """When `scheduling.maxRunDuration` ends the VM's run (counted from its last start;
        a stopped VM's clock starts again when it starts), or None."""
        limit = self.body.get("scheduling", {}).get("maxRunDuration")
        if not limit or self.status != "RUNNING" or self.last_start is None:
            return None
        return self.last_start + int(limit.get("seconds", 0)) + int(limit.get("nanos", 0)) / 1e9

    def shown_status(self, now: float) -> str:
        """The status as of `now` (a transition under way shows its phase)."""
        if self.transition is None or self.started is None:
            return self.status
        first, second = TRANSITIONS[self.transition][0]
        if self.deadline is None:  # held: it stays in its first phase
            return first
        halfway = self.started + (self.deadline - self.started) / 2
        return first if now < halfway else second

    def begin(self, verb: str, now: float, duration: float | None) -> None:
        self.transition, self.started = verb, now
        self.deadline = None if duration is None else now + duration

    def due(self, now: float) -> bool:
        return self.transition is not None and self.deadline is not None and now >= self.deadline

    def finish(self) -> bool:
        """Complete the transition; True when the instance is gone."""
        after = TRANSITIONS[self.transition or "create"][1]
        self.transition = self.started = self.deadline = None
        if after is None:
            return True
        self.status = after
        return False


def _ed25519_blob() -> str:
    """A well-formed ssh-ed25519 public key blob (base64), as a guest publishes one."""
    kind = b"ssh-ed25519"
    raw = len(kind).to_bytes(4, "big") + kind + (32).to_bytes(4, "big") + secrets.token_bytes(32)
    return base64.b64encode(raw).decode()


@dataclass
class ZoneOperation:
    """An operation of a zone (instances, groups), of a region (`kind` "regions", `zone`
    the region: workload policies, regional templates) or global (`kind` "global", `zone`
    empty: global templates)."""

    project: str
    zone: str
    name: str
    operation_type: str  # insert, delete, start, stop, setLabels
    target: str  # the resource's path
    target_id: str
    inserted: float
    status: str = "RUNNING"
    started: float | None = None
    ended: float | None = None
    errors: list[dict[str, str]] = field(default_factory=list)
    http_error: tuple[int, str] | None = None
    kind: str = "zones"
    request_id: str = ""  # the `requestId` it was asked with: a retry gets this operation

    @property
    def scope(self) -> str:
        """`zones/Z`, `regions/R` or `global`."""
        return "global" if self.kind == "global" else f"{self.kind}/{self.zone}"

    @property
    def path(self) -> str:
        return f"projects/{self.project}/{self.scope}/operations/{self.name}"

    @property
    def done(self) -> bool:
        return self.status == "DONE"

    def succeed(self, now: float) -> None:
        self.status, self.ended = "DONE", now

    def fail(
        self, now: float, code: str, message: str, http: tuple[int, str], **detail: Any
    ) -> None:
        self.errors = [{"code": code, "message": message, **detail}]
        self.http_error = http
        self.succeed(now)

    @classmethod
    def new(cls, instance: Instance, operation_type: str, now: float) -> ZoneOperation:
        return cls.on(
            instance.project,
            "zones",
            instance.zone,
            operation_type,
            instance.path,
            instance.uid,
            now,
        )

    @classmethod
    def on(
        cls,
        project: str,
        kind: str,
        where: str,
        operation_type: str,
        target: str,
        target_id: str,
        now: float,
    ) -> ZoneOperation:
        """An operation in scope `kind`/`where` (`where` "" for global) on `target`."""
        name = f"operation-{int(now * 1000)}-{secrets.token_hex(6)}-{secrets.token_hex(4)}"
        return cls(
            project, where, name, operation_type, target, target_id, now, started=now, kind=kind
        )


@dataclass
class ComputeState:
    """Every instance, operation, workload policy, instance template and managed instance
    group, by path."""

    instances: dict[str, Instance] = field(default_factory=dict)
    operations: dict[str, ZoneOperation] = field(default_factory=dict)
    policies: dict[str, Policy] = field(default_factory=dict)
    templates: dict[str, Template] = field(default_factory=dict)
    groups: dict[str, Group] = field(default_factory=dict)
    reservations: dict[str, Reservation] = field(default_factory=dict)

    def by_request(self, project: str, request_id: str) -> ZoneOperation | None:
        """The operation a request with `request_id` made in `project`, if kept."""
        return next(
            (
                op
                for op in self.operations.values()
                if op.request_id == request_id and op.project == project
            ),
            None,
        )

    def chips_in_use(self, zone: str, generation: str, but: Instance | None = None) -> int:
        """The chips of `generation` the instances in `zone` hold (but `but`): a stopped
        instance, or one whose create or start will fail, holds none."""
        return sum(
            i.chips
            for i in self.instances.values()
            if i is not but
            and i.zone == zone
            and i.generation == generation
            and i.status not in ("TERMINATED", "PENDING")
            and i.transition != "stop"
            and not i.capacity_error
            and not i.quota_error
        )

    def quota_in_use(self, instance: Instance) -> int:
        """The chips of the instance's quota that the project's other VMs in its region hold
        (a stopped VM keeps its quota, as on the Cloud TPU API; a failing one holds none)."""
        region = instance.zone.rsplit("-", 1)[0]
        return sum(
            i.chips
            for i in self.instances.values()
            if i is not instance
            and i.project == instance.project
            and i.zone.rsplit("-", 1)[0] == region
            and i.generation == instance.generation
            and i.preemptible == instance.preemptible
            and i.transition != "delete"
            and not i.capacity_error
            and not i.quota_error
        )

    def to_state(self) -> dict[str, Any]:
        """What the state file keeps (core/persistence.py)."""
        return {
            "instances": [asdict(i) for i in self.instances.values()],
            "operations": [asdict(op) for op in self.operations.values()],
            "policies": [asdict(p) for p in self.policies.values()],
            "templates": [asdict(t) for t in self.templates.values()],
            "groups": [asdict(g) for g in self.groups.values()],
            "reservations": [asdict(r) for r in self.reservations.values()],
        }

    def load(self, data: dict[str, Any]) -> None:
        self.instances = {i.path: i for i in (Instance(**d) for d in data.get("instances", []))}
        ops = [ZoneOperation(**d) for d in data.get("operations", [])]
        for op in ops:
            op.http_error = tuple(op.http_error) if op.http_error else None  # type: ignore[assignment]
        self.operations = {op.path: op for op in ops}
        self.policies = {p.path: p for p in (Policy(**d) for d in data.get("policies", []))}
        self.templates = {t.path: t for t in (Template(**d) for d in data.get("templates", []))}
        self.groups = {g.path: g for g in (Group(**d) for d in data.get("groups", []))}
        found = (Reservation(**d) for d in data.get("reservations", []))
        self.reservations = {r.path: r for r in found}
