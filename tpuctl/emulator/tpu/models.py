"""Resources of the emulated Cloud TPU API: nodes, operations, queued resources and
worker addresses, as plain objects holding state.

Each resource is a plain dict for the state file (`to_state` / `from_state`); the wire
format, v2 REST JSON, is the front's (`front.py`). Node life cycles are declared as
data in `TRANSITIONS`; the state decides when a transition may start and when it is due.
"""

from __future__ import annotations

import dataclasses
import hashlib
import ipaddress
import secrets
from dataclasses import dataclass, field
from typing import Any

from tpuctl.emulator.core.projects import project_number as project_number
from tpuctl.emulator.offerings.accelerators import AcceleratorType, parse_accelerator

DEFAULT_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
WORKER_PORT = 8470
HOSTKEYS_NAMESPACE = "hostkeys"


def tpu_vm_name(uid: str, worker: int) -> str:
    """A Cloud TPU API VM's name (its hostname): `t1v-n-<8 hex>-w-<worker>`."""
    return f"t1v-n-{hashlib.sha256(uid.encode()).hexdigest()[:8]}-w-{worker}"


@dataclass(frozen=True)
class Transition:
    """A change of state that takes time: `during` while it runs, then `after`."""

    verb: str
    during: str
    after: str | None  # None: the node is gone once it completes
    allowed_from: tuple[str, ...] | None  # None: from any state


TRANSITIONS: dict[str, Transition] = {
    "create": Transition("create", "CREATING", "READY", ()),
    "stop": Transition("stop", "STOPPING", "STOPPED", ("READY",)),
    "start": Transition("start", "STARTING", "READY", ("STOPPED",)),
    "delete": Transition("delete", "DELETING", None, None),
    # A preemption notice: the node still looks READY while its guest gets the notice
    # (metadata `instance/preempted` TRUE, SIGTERM to every process), then it is gone.
    "preempt": Transition("preempt", "READY", "PREEMPTED", ("READY",)),
}


@dataclass
class Node:
    """One TPU VM slice: `workers` VMs, each with a loopback address of its own."""

    project: str
    zone: str
    node_id: str
    accelerator_type: str
    runtime_version: str
    uid: str
    create_time: float
    addresses: list[str]
    state: str = "CREATING"
    description: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    metadata: dict[str, str] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    network: str = ""
    subnetwork: str = ""
    enable_external_ips: bool = False
    can_ip_forward: bool = False
    cidr_block: str = "10.128.0.0/20"
    service_account: dict[str, Any] = field(default_factory=dict)
    scheduling: dict[str, bool] = field(default_factory=dict)
    data_disks: list[dict[str, Any]] = field(default_factory=list)
    shielded_instance_config: dict[str, Any] | None = None
    # the transition under way, and when it is due (None: held until advanced)
    transition: str | None = None
    deadline: float | None = None
    # per worker: [{namespace, key, value}, ...]
    guest_attributes: list[list[dict[str, str]]] = field(default_factory=list)
    # set when the zone had no capacity left: the create operation ends with this error
    capacity_error: str | None = None
    # the queued resource that made this node, if one did
    queued_resource: str = ""
    # made by a multislice request (`multisliceParams`): one slice of several
    multislice_node: bool = False
    # set from the control plane: health ("" -> HEALTHY while READY), its description,
    # and symptoms [{symptomType, details, workerId, createTime}]
    health: str = ""
    health_description: str = ""
    symptoms: list[dict[str, str]] = field(default_factory=list)
    # when the guest's host keys become visible in guest attributes (None: not booted yet)
    hostkeys_at: float | None = None
    terminate_at: float | None = None  # a flex-start node's end (its request's run duration)
    # a host maintenance announced (core/maintenance.py's record; tpu/maintenance.py)
    maintenance: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        workers = self.accelerator.workers
        while len(self.guest_attributes) < workers:
            self.guest_attributes.append([])

    @property
    def name(self) -> str:
        return f"projects/{self.project}/locations/{self.zone}/nodes/{self.node_id}"

    @property
    def accelerator(self) -> AcceleratorType:
        acc = parse_accelerator(self.accelerator_type)
        assert acc is not None, self.accelerator_type
        return acc

    def serving(self) -> list[int]:
        """The workers whose VM runs: all of a READY node's (a TPU API node is preempted,
        stopped and deleted whole)."""
        return list(range(len(self.addresses))) if self.state == "READY" else []

    @property
    def shutting_down(self) -> list[int]:
        """The workers whose guest is being shut down for a host maintenance: all of a
        node's (tpu/maintenance.py)."""
        record = self.maintenance
        busy = record is not None and record["phase"] == "SHUTDOWN" and record.get("took")
        return list(range(len(self.addresses))) if busy else []

    # -- state machine -----------------------------------------------------
    def may_begin(self, verb: str) -> bool:
        if self.transition == "preempt" and verb != "delete":
            return False  # the notice runs out whatever anyone asks, but a delete
        allowed = TRANSITIONS[verb].allowed_from
        return allowed is None or self.state in allowed

    def begin(self, verb: str, now: float, duration: float | None) -> None:
        """Enter the transition `verb`; it completes at now + duration (None: when advanced)."""
        self.transition = verb
        self.state = TRANSITIONS[verb].during
        self.deadline = None if duration is None else now + duration

    def due(self, now: float) -> bool:
        return self.transition is not None and self.deadline is not None and self.deadline <= now

    def finish(self) -> bool:
        """Complete the transition under way; True when the node is now gone."""
        if self.transition is None:
            return False
        after = TRANSITIONS[self.transition].after
        self.transition = None
        self.deadline = None
        if after is None:
            return True
        self.state = after
        return False

    # -- guest attributes ----------------------------------------------------
    def set_guest_attributes(self, worker: int, items: list[dict[str, str]]) -> None:
        """Publish entries on one worker, replacing those with the same namespace and key."""
        entries = self.guest_attributes[worker]
        for item in items:
            key = (item["namespace"], item["key"])
            entries[:] = [e for e in entries if (e["namespace"], e["key"]) != key]
            entries.append({"namespace": key[0], "key": key[1], "value": item["value"]})

    def query_guest_attributes(
        self, worker: int, query_path: str, now: float
    ) -> list[dict[str, str]]:
        """Entries on a worker under `namespace/` or `namespace/key` (all when empty);
        host keys only once the guest has published them (`hostkeys_at`)."""
        namespace, _, key = query_path.strip("/").partition("/")
        booted = self.hostkeys_at is not None and self.hostkeys_at <= now
        return [
            dict(e)
            for e in self.guest_attributes[worker]
            if (not namespace or e["namespace"] == namespace)
            and (not key or e["key"] == key)
            and (booted or e["namespace"] != HOSTKEYS_NAMESPACE)
        ]

    # -- the state file ------------------------------------------------------
    def to_state(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def snapshot(self) -> dict[str, Any]:
        """The node as an operation keeps it (`Operation.response`): its state, less the
        guest attributes, which no answer shows."""
        return {"node": {**self.to_state(), "guest_attributes": []}}

    @classmethod
    def from_state(cls, data: dict[str, Any]) -> Node:
        return cls(**data)


@dataclass
class Operation:
    """A long-running operation on one node or queued resource; done when the node's
    transition completes (a queued resource's, at once)."""

    project: str
    zone: str
    op_id: str
    verb: str
    target: str
    create_time: float
    done: bool = False
    end_time: float | None = None
    error: dict[str, Any] | None = None  # google.rpc.Status: {code, message}
    # What a done operation answers: the resource as it was when the operation ended, in
    # its state form (`{"node": Node.to_state()}`, `{"queued_resource": ...}`), or {}
    # for Empty (a resource gone).
    response: dict[str, Any] | None = None

    @classmethod
    def new(cls, project: str, zone: str, target: str, verb: str, now: float) -> Operation:
        suffix = f"{secrets.token_hex(7)[:13]}-{secrets.token_hex(4)}-{secrets.token_hex(4)}"
        op_id = f"operation-{int(now * 1000)}-{suffix}"
        return cls(project, zone, op_id, verb, target, now)

    @property
    def name(self) -> str:
        return f"projects/{self.project}/locations/{self.zone}/operations/{self.op_id}"

    def succeed(self, now: float, resource: Node | QueuedResource | None) -> None:
        """Done, answering the resource as it is now (or Empty when it is gone)."""
        self.done, self.end_time = True, now
        self.response = {} if resource is None else resource.snapshot()

    def fail(self, now: float, code: int, message: str) -> None:
        self.done, self.end_time = True, now
        self.error = {"code": code, "message": message}

    def to_state(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_state(cls, data: dict[str, Any]) -> Operation:
        return cls(**data)


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
    # v2alpha1's fields v2 lacks (flex-start's provisioningModel, runDuration), and when
    # the nodes' run ends by them (set when provisioned)
    alpha: dict[str, Any] = field(default_factory=dict)
    run_ends: float | None = None

    @property
    def name(self) -> str:
        return f"projects/{self.project}/locations/{self.zone}/queuedResources/{self.qr_id}"

    def node_names(self) -> list[str]:
        return [Node.from_state(n).name for n in self.nodes]

    def snapshot(self) -> dict[str, Any]:
        """The request as an operation keeps it (`Operation.response`)."""
        return {"queued_resource": self.to_state()}

    def to_state(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_state(cls, data: dict[str, Any]) -> QueuedResource:
        return cls(**data)


def _random_base() -> int:
    return secrets.randbelow(AddressAllocator.NETWORK.num_addresses - 1) + 1


@dataclass
class AddressAllocator:
    """Hands out distinct loopback addresses from 127.64.0.0/10, never twice.

    Never reusing one keeps a later node from inheriting an earlier node's SSH host key
    in someone's known_hosts. Addresses ending in .0 or .255 are skipped.
    """

    # Each emulator starts at a random place, so two emulators on one machine (a user's
    # and a test suite's) do not hand out the same addresses.
    next_index: int = field(default_factory=lambda: _random_base())

    NETWORK = ipaddress.IPv4Network("127.64.0.0/10")

    def allocate(self, count: int) -> list[str]:
        out: list[str] = []
        while len(out) < count:
            index = self.next_index % self.NETWORK.num_addresses
            self.next_index = index + 1
            address = self.NETWORK[index]
            if address.packed[-1] in (0, 255):
                continue
            out.append(str(address))
        return out


@dataclass
class Page:
    """One page of a list method's answer: its resources, and the token of the next page
    (None on the last)."""

    items: list[Any]
    next_token: str | None = None
