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
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from tpuctl.emulator.billing.catalog import BillingCatalog
from tpuctl.emulator.compute.models import ComputeState
from tpuctl.emulator.core import errors
from tpuctl.emulator.core.errors import Faults
from tpuctl.emulator.iam.access import Access
from tpuctl.emulator.iam.org_policy import Policies
from tpuctl.emulator.quotas.limits import QuotaConfig
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
    # Compute Engine (docs/emulator-fidelity.md cites it); a preemption may set its own.
    "preempt_notice": 30.0,
}
DEFAULT_PROJECT = "tpuctl-demo"
DEFAULT_ZONE = "us-central1-a"
MAX_DONE_OPERATIONS = 500


class State:
    """Nodes, operations and queued resources of every project and zone, the config
    (durations, defaults, quotas, faults) and the clock."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.allocator = AddressAllocator()
        self.clear()

    def clear(self) -> None:
        """Back to a fresh emulator (the allocator carries on)."""
        self.nodes: dict[str, Node] = {}
        self.operations: dict[str, Operation] = {}
        self.queued: dict[str, QueuedResource] = {}
        self.compute = ComputeState()  # Compute Engine's TPU VM instances (compute/)
        self.durations: dict[str, float | None] = dict(DEFAULT_DURATIONS)
        self.defaults = {"project": DEFAULT_PROJECT, "zone": DEFAULT_ZONE}
        self.faults = Faults()
        self.quota = QuotaConfig()
        self.access = Access()  # enabled APIs, billing, the caller's permissions
        self.policies = Policies()  # organisation policies, the TPU service agent
        self.quota_prefs: dict[str, dict[str, Any]] = {}  # Cloud Quotas preferences by name
        # Compute's project metadata (e.g. enable-oslogin) and OS Login profiles (iam/oslogin.py)
        self.project_metadata: dict[str, dict[str, str]] = {}
        self.oslogin: dict[str, dict[str, Any]] = {}
        # What fake-gcs-server does not keep of a Cloud Storage bucket, by its name: its
        # lifecycle configuration and metageneration (storage/proxy.py)
        self.buckets: dict[str, dict[str, Any]] = {}
        self.billing = BillingCatalog()  # the Cloud Billing Catalog's SKUs (billing/)
        self.rng = random.Random()
        self.dirty = True

    def now(self) -> float:
        return self.clock()

    def changed(self) -> None:
        """Something changed: it is written out (and the listeners told) after the call."""
        self.dirty = True

    def config(self) -> dict[str, Any]:
        """The config as the control plane shows it and as the state file keeps it."""
        return {
            "durations": dict(self.durations),
            "defaults": dict(self.defaults),
            **self.quota.to_config(),
            **self.access.to_config(),
            **self.policies.to_config(),
            **self.billing.to_config(),
            "project_metadata": {p: dict(md) for p, md in self.project_metadata.items()},
        }

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
