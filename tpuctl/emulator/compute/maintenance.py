"""Host maintenance of Compute Engine's TPU VMs (the window itself: core/maintenance.py).

A VM with `scheduling.onHostMaintenance: TERMINATE` (every TPU VM: they cannot
live-migrate) is stopped for the maintenance and "automaticRestart decides restart"
(Scheduling in the v1 reference, https://cloud.google.com/compute/docs/reference/rest/v1/instances;
Host maintenance overview, https://cloud.google.com/compute/docs/instances/host-maintenance-overview).
Here: at the window's start its guest sees `instance/maintenance-event`
`TERMINATE_ON_HOST_MAINTENANCE` and gets the ACPI soft off (SIGTERM to its processes,
workers/ssh.py); then it is TERMINATED until the window's end, when it starts again if
`automaticRestart` is true and it is neither spot nor preemptible (which cannot restart
on their own), its files kept as after a stop and start. A VM that live-migrates
(MIGRATE) runs on; its guest sees `MIGRATE_ON_HOST_MAINTENANCE` during the window.

The API: `Instance.resourceStatus.upcomingMaintenance` while one is announced;
`instances.simulateMaintenanceEvent` carries one out now ("Simulate a host maintenance
event", https://cloud.google.com/compute/docs/instances/simulating-host-maintenance);
`instances.performMaintenance` starts a PENDING one whose `canReschedule` is true now
("Monitor and plan for a host maintenance event"). Compute's wording when none is
pending is not public: the 400 here is the emulator's.
"""

from __future__ import annotations

from typing import Any

from tpuctl.emulator.compute import api, errors, transitions
from tpuctl.emulator.compute.models import Instance, ZoneOperation
from tpuctl.emulator.core import maintenance as window
from tpuctl.emulator.core.state import State


def _migrates(vm: Instance) -> bool:
    return (vm.body.get("scheduling") or {}).get("onHostMaintenance") == "MIGRATE"


def _restarts(vm: Instance) -> bool:
    sched = vm.body.get("scheduling") or {}
    spot = sched.get("provisioningModel") in ("SPOT", "FLEX_START") or sched.get("preemptible")
    return bool(sched.get("automaticRestart", True)) and not spot


def announce(
    state: State, vm: Instance, notice: Any, duration: Any, kind: str = "SCHEDULED"
) -> dict[str, Any]:
    """A maintenance on one VM, `notice` seconds from now."""
    now = state.now()
    vm.maintenance = window.announce(now, notice, duration, kind)
    state.changed()
    _apply(state, vm, now)
    return {"name": vm.path, "upcomingMaintenance": window.render(vm.maintenance)}


def _apply(state: State, vm: Instance, now: float) -> None:
    """Bring the VM's maintenance to the phase the clock says, a phase at a time."""
    record = vm.maintenance
    while record is not None and record["phase"] != window.due_phase(record, now):
        phase = record["phase"]
        if phase == "PENDING":
            record["phase"] = "SHUTDOWN"
            running = vm.status == "RUNNING" and vm.transition is None
            record["took"] = running and not _migrates(vm)
        elif phase == "SHUTDOWN":
            record["phase"] = "DOWN"
            if record.get("took") and vm.status == "RUNNING" and vm.transition is None:
                vm.status, vm.last_stop, vm.hostkeys_at = "TERMINATED", now, None
            else:
                record["took"] = False
        else:
            vm.maintenance = None
            stopped = vm.status == "TERMINATED" and vm.transition is None
            if record.get("took") and stopped and _restarts(vm):
                # Compute starts it again itself: no operation of anyone's
                vm.capacity_error = transitions._capacity_error(state, vm)
                vm.begin("start", now, state.durations.get("start"))
                if vm.due(now):
                    transitions._complete(state, vm, now)
        state.changed()
        record = vm.maintenance


def tick(state: State, now: float) -> None:
    window.tick(state.compute.instances.values(), lambda vm, at: _apply(state, vm, at), now)


def advance(state: State, vm: Instance) -> bool:
    """Control plane: the maintenance's next phase begins now."""
    return window.advance(vm, lambda held, at: _apply(state, held, at), state.now())


def shutting_down(vm: Instance | None) -> bool:
    """Whether the VM's guest is being shut down for a maintenance."""
    record = vm.maintenance if vm is not None else None
    return record is not None and record["phase"] == "SHUTDOWN" and bool(record.get("took"))


def perform(state: State, project: str, zone: str, name: str, simulate: bool) -> ZoneOperation:
    """`instances.simulateMaintenanceEvent` (a maintenance now, on a RUNNING VM) or
    `instances.performMaintenance` (the PENDING one, now): an operation DONE at once."""
    vm = api.get(state, project, zone, name)
    now = state.now()
    record = vm.maintenance
    if simulate:
        if vm.shown_status(now) != "RUNNING" or vm.transition is not None:
            raise errors.not_ready(vm.path)
        if record is None:
            record = vm.maintenance = window.announce(now, 0, None, "UNSCHEDULED")
    elif record is None or record["phase"] != "PENDING" or not record["can_reschedule"]:
        raise errors.bad_request(
            f"Instance {vm.name} has no pending maintenance that can be started now."
        )
    window.begin_now(record, now)
    _apply(state, vm, now)
    verb = "simulateMaintenanceEvent" if simulate else "performMaintenance"
    op = ZoneOperation.new(vm, verb, now)
    op.succeed(now)
    transitions._keep(state, op)
    return op
