"""Host maintenance of Cloud TPU API nodes (the window itself: core/maintenance.py).

A TPU VM cannot live-migrate, so a maintenance stops it: "TPU VMs are instances of
Compute Engine VMs ... subject to Compute Engine VM maintenance events" (Manage
maintenance events, https://cloud.google.com/tpu/docs/maintenance-events), and a slice's
maintenance takes all its VMs ("starting maintenance on a Cloud TPU slice starts
maintenance on all underlying TPU VMs", Manually start a host maintenance event,
https://cloud.google.com/tpu/docs/manually-start-maintenance). Here, at the window's
start the node still answers READY while its guests are shut down (SIGTERM, as for a
preemption's notice: workers/ssh.py); then, while the window lasts, it is REPAIRING
with health UNHEALTHY_MAINTENANCE (the v2 enums: "The node is under maintenance/priority
boost caused rescheduling and will resume running once rescheduled"), and READY again
at its end, its workers' files kept as after a stop and start. A spot or preemptible
node does not come back: it is PREEMPTED (a TPU Spot VM cannot be restarted, tpu-facts).
Which state the real API shows during the window is not documented: REPAIRING is the
emulator's choice.

`performMaintenance` (v2alpha1 only: `tpu.v2alpha1.json` has
`projects.locations.nodes.performMaintenance`, v2 has not) starts a PENDING maintenance
whose `canReschedule` is true now; `simulateMaintenanceEvent` (v2alpha1 too) carries one
out now.
"""

from __future__ import annotations

from typing import Any

from tpuctl.emulator.core import errors
from tpuctl.emulator.core import maintenance as window
from tpuctl.emulator.core.state import State
from tpuctl.emulator.tpu import nodes as tpu_nodes
from tpuctl.emulator.tpu.models import Node, Operation


def announce(
    state: State,
    node: Node,
    notice: Any,
    duration: Any,
    worker: int | None,
    kind: str = "SCHEDULED",
) -> dict[str, Any]:
    workers = len(node.addresses)
    if worker is not None and (
        isinstance(worker, bool) or not isinstance(worker, int) or not 0 <= worker < workers
    ):
        raise errors.invalid_argument(f"worker must be 0 to {workers - 1} for {node.name}")
    if node.maintenance is not None:
        raise errors.failed_precondition(f"Node {node.name} already has a maintenance.")
    now = state.now()
    node.maintenance = window.announce(now, notice, duration, kind, worker)
    state.changed()
    _apply(state, node, now)
    return {"name": node.name, "upcomingMaintenance": window.render(node.maintenance)}


def _preemptible(node: Node) -> bool:
    return bool(node.scheduling.get("preemptible") or node.scheduling.get("spot"))


def _apply(state: State, node: Node, now: float) -> None:
    """Bring the node's maintenance to the phase the clock says, a phase at a time."""
    record = node.maintenance
    while record is not None and record["phase"] != window.due_phase(record, now):
        phase = record["phase"]
        if phase == "PENDING":
            record["phase"] = "SHUTDOWN"
            # a node stopped, or in a transition, is not taken down (nothing runs on it)
            record["took"] = node.state == "READY" and node.transition is None
        elif phase == "SHUTDOWN":
            record["phase"] = "DOWN"
            if record.get("took") and _preemptible(node):
                node.state, node.maintenance = "PREEMPTED", None
            elif record.get("took"):
                node.state, node.health = "REPAIRING", "UNHEALTHY_MAINTENANCE"
        else:
            if record.get("took") and node.state == "REPAIRING":
                node.state, node.health = "READY", ""
            node.maintenance = None
        state.changed()
        record = node.maintenance


def tick(state: State, now: float) -> None:
    window.tick(state.nodes.values(), lambda node, at: _apply(state, node, at), now)


def advance(state: State, node: Node) -> bool:
    """Control plane: the maintenance's next phase begins now."""
    return window.advance(node, lambda held, at: _apply(state, held, at), state.now())


def perform(state: State, node: Node, simulate: bool) -> Operation:
    """`nodes.performMaintenance` (a PENDING rescheduleable one starts now) or
    `nodes.simulateMaintenanceEvent` (one is carried out now), as an operation done at
    once whose response is the node."""
    now = state.now()
    record = node.maintenance
    if simulate and record is None:
        record = node.maintenance = window.announce(now, 0, None, "UNSCHEDULED")
    elif record is None or record["phase"] != "PENDING" or not record["can_reschedule"]:
        raise errors.failed_precondition(
            f"Node {node.name} has no pending maintenance that can be rescheduled."
        )
    window.begin_now(record, now)
    _apply(state, node, now)
    verb = "simulateMaintenanceEvent" if simulate else "performMaintenance"
    op = Operation.new(node.project, node.zone, node.name, verb, now)
    op.succeed(now, node)
    tpu_nodes.add_operation(state, op)
    return op
