"""Everything the emulated cloud holds, and how nodes move through their transitions.

Invariants:
- No lock here: the facade (`backend.Backend`) holds one around every call into this
  state and into the modules that work on it (`tpu.api`, `tpu.queued`, `control.api`).
- Transitions run on wall-clock deadlines stored on each node and queued resource (so
  they survive a restart). They are applied by the facade calling `tick_nodes` and
  `queued.tick` at the start of every call, and by the server's ticker in between; each
  completes as of its deadline, not of when it was applied, so the state a caller sees
  depends on the clock alone, never on how often anyone looked.
- `dirty` is True whenever something changed since the state was last written; whoever
  changes the state sets it (`changed()`), `persistence.save` clears it.
- The address allocator outlives `clear()`: an address is never handed out twice.
- Each service's part of the state is a slot it registers (`service.Slot`), read as
  `state.<slot name>`; this module names no service's slot.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from typing import Any

from tpuctl.emulator.core import errors
from tpuctl.emulator.core.errors import Faults
from tpuctl.emulator.core.slots import Slot
from tpuctl.emulator.tpu import rules
from tpuctl.emulator.tpu.models import AddressAllocator, Node, Operation, QueuedResource

DEFAULT_DURATIONS: dict[str, float | None] = {
    "create": 1.0,
    "stop": 0.5,
    "start": 0.5,
    "delete": 0.5,
    # queued resources: CREATING -> ACCEPTED, then ACCEPTED -> a try to provision
    "queued_accept": 0.5,
    "queued_schedule": 0.5,
    # how long after a node first becomes READY its guest publishes the SSH host keys
    # (guest attributes `hostkeys/`), as a booting TPU VM's guest agent does
    "hostkeys": 1.0,
    # Service Usage: an enable's operation (quotas/service_usage.py)
    "enable_service": 0.5,
    # A preempted spot or preemptible node's notice: its guest sees `instance/preempted`
    # TRUE and every process gets SIGTERM, then the node is PREEMPTED. About 30 s on
    # Compute Engine (contributing/emulator-fidelity.md cites it); a preemption may set its own.
    "preempt_notice": 30.0,
}
DEFAULT_PROJECT = "tpuctl-demo"
DEFAULT_ZONE = "us-central1-a"
MAX_DONE_OPERATIONS = 500
OWN_CONFIG_KEYS = frozenset({"durations", "defaults"})  # the others: the slots'


class State:
    """Nodes, operations and queued resources of every project and zone, the config
    (durations, defaults, faults), the clock, and the services' slots (`slots`: what
    `service.Slot` each service registers, `emulator/services.py` lists)."""

    def __init__(self, clock: Callable[[], float] = time.time, slots: Iterable[Slot] = ()) -> None:
        self.clock = clock
        self.allocator = AddressAllocator()
        self.slots: dict[str, Slot] = {}
        for slot in slots:
            if slot.name in self.slots:
                raise ValueError(f"two slots named {slot.name}")
            self.slots[slot.name] = slot
        self.clear()
        if clash := set(self.slots) & set(vars(self)):
            raise ValueError(f"slots named as the state's own: {sorted(clash)}")

    def __getattr__(self, name: str) -> Any:
        """A service's slot (called only for names the state itself does not hold)."""
        try:
            return self.__dict__["held"][name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self.__dict__.get("slots", ()):
            self.held[name] = value  # a slot made anew (e.g. loaded)
        else:
            object.__setattr__(self, name, value)

    def clear(self) -> None:
        """Back to a fresh emulator (the allocator carries on)."""
        self.nodes: dict[str, Node] = {}
        self.operations: dict[str, Operation] = {}
        self.queued: dict[str, QueuedResource] = {}
        self.durations: dict[str, float | None] = dict(DEFAULT_DURATIONS)
        self.defaults = {"project": DEFAULT_PROJECT, "zone": DEFAULT_ZONE}
        self.faults = Faults()
        self.held: dict[str, Any] = {name: slot.new() for name, slot in self.slots.items()}
        self.rng = random.Random()
        self.dirty = True

    def now(self) -> float:
        return self.clock()

    def changed(self) -> None:
        """Something changed: it is written out (and the listeners told) after the call."""
        self.dirty = True

    def config(self) -> dict[str, Any]:
        """The config as the control plane shows it and as the state file keeps it."""
        config: dict[str, Any] = {
            "durations": dict(self.durations),
            "defaults": dict(self.defaults),
        }
        for slot in self.slots.values():
            config.update(slot.config(self))
        return config

    def update_config(self, body: dict[str, Any]) -> dict[str, Any]:
        """Change durations, defaults and the slots' settings, all checked before any
        applies (control plane: `POST config`); the config as it is then."""
        known = OWN_CONFIG_KEYS.union(*(slot.config_keys for slot in self.slots.values()))
        unknown = set(body) - known
        if unknown:
            raise errors.invalid_argument(f"unknown config keys: {sorted(unknown)}")
        durations = body.get("durations") or {}
        for verb, seconds in durations.items():
            if verb not in DEFAULT_DURATIONS:
                raise errors.invalid_argument(f"unknown duration '{verb}'")
            number = isinstance(seconds, (int, float)) and not isinstance(seconds, bool)
            if (seconds is not None or verb == "hostkeys") and not (number and seconds >= 0):
                held = "" if verb == "hostkeys" else " or null"
                raise errors.invalid_argument(f"duration '{verb}' must be seconds >= 0{held}")
        defaults = body.get("defaults") or {}
        for key, value in defaults.items():
            if key not in ("project", "zone") or not isinstance(value, str) or not value:
                raise errors.invalid_argument(f"bad default {key}={value!r}")
        for slot in self.slots.values():
            slot.validate(body)
        for slot in self.slots.values():
            slot.update(self, body)
        self.durations.update({k: None if v is None else float(v) for k, v in durations.items()})
        self.defaults.update(defaults)
        self.changed()
        return self.config()

    # -- lookups -------------------------------------------------------------
    def node(self, project: str, zone: str, node_id: str, permission: str) -> Node:
        rules.check_zone(project, zone, permission)
        return self.node_by_name(f"projects/{project}/locations/{zone}/nodes/{node_id}")

    def node_by_name(self, name: str) -> Node:
        node = self.nodes.get(name)
        if node is None:
            raise errors.not_found(name)
        return node

    # -- node transitions ----------------------------------------------------------
    def tick_nodes(self, now: float) -> None:
        """Complete every node transition that is due."""
        for node in list(self.nodes.values()):
            if node.due(now):
                # as of when it was due, not of when someone looked
                self.complete(node, node.deadline if node.deadline is not None else now)

    def _pending(self, target: str, verb: str | None) -> list[Operation]:
        return [
            op
            for op in self.operations.values()
            if not op.done and op.target == target and op.verb == verb
        ]

    def complete(self, node: Node, now: float) -> None:
        """Complete the node's transition now, and the operations waiting on it."""
        verb = node.transition
        if verb in ("create", "start") and node.capacity_error:
            # The zone ran out: the operation fails with RESOURCE_EXHAUSTED; a create's
            # node never comes to be, a start's stays STOPPED.
            for op in self._pending(node.name, verb):
                op.fail(now, errors.CODES["RESOURCE_EXHAUSTED"], node.capacity_error)
            if verb == "create":
                del self.nodes[node.name]
            else:
                node.transition, node.deadline, node.capacity_error = None, None, None
                node.state = "STOPPED"
            self.dirty = True
            return
        gone = node.finish()
        if gone:
            del self.nodes[node.name]
        elif node.state == "READY" and node.hostkeys_at is None:
            node.hostkeys_at = now + (self.durations["hostkeys"] or 0.0)
        for op in self._pending(node.name, verb):
            op.succeed(now, None if gone else node)
        self.dirty = True

    def begin(self, node: Node, verb: str, at: float | None = None) -> Operation:
        """Start the transition `verb` (aborting another under way); its operation.
        `at`: when it began, if before now (a queued resource provisioned while nobody
        asked), so that it is due as the clock says."""
        now = self.clock()
        start = now if at is None else at
        if node.transition != verb:
            for op in self._pending(node.name, node.transition):
                message = f"The {op.verb} operation was aborted: the node is being {verb}d."
                op.fail(now, errors.CODES["ABORTED"], message)
            node.begin(verb, start, self.durations[verb])
        op = Operation.new(node.project, node.zone, node.name, verb, start)
        self.add_operation(op)
        if node.due(now):
            self.complete(node, node.deadline if node.deadline is not None else now)
        return op

    def add_operation(self, op: Operation) -> None:
        """Keep `op`; only the newest MAX_DONE_OPERATIONS done ones are kept."""
        self.operations[op.name] = op
        done = [o for o in self.operations.values() if o.done]
        for old in sorted(done, key=lambda o: o.create_time)[
            : max(0, len(done) - MAX_DONE_OPERATIONS)
        ]:
            del self.operations[old.name]
        self.dirty = True
