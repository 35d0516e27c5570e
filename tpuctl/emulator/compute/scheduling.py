"""How Compute Engine schedules a TPU VM beyond its create: flex-start VMs waiting for
capacity (PENDING), reservations consumed, and spot preemption with its notice.

- **Flex-start** (`provisioningModel: FLEX_START`): an insert that finds no capacity
  leaves its VM `PENDING` ("waiting for available capacity from DWS", Instance.Status in
  Compute's v1 API) and its operation RUNNING, until capacity frees (the create then
  goes on) or `params.requestValidForDuration` passes: "If resources aren't available,
  then the VM creation request fails" (About Flex-start VMs,
  https://cloud.google.com/compute/docs/instances/about-flex-start-vms); its operation
  then fails as a stockout does and the VM is gone. 2 hours when not given ("persist in
  a queue for up to two hours", Google's flex-start VMs announcement, 2025-09-25). A
  group in bulk mode (`targetSizePolicy.mode: BULK`, offered with flex-start and
  reservation-bound templates only, About bulk mode) makes its VMs PENDING and begins
  them together, when the zone has room for all.
- **Reservations**: set from the control plane (zone, machine type, count, whether
  only a specific affinity may consume it). `SPECIFIC_RESERVATION` must name one that
  exists, else "Could not find the given reservation with the following name" (the
  message Google's cluster autoscaler matches, kubernetes/autoscaler#6006; what follows
  the name is the emulator's), and one with `specificReservationRequired` is not taken
  by `ANY_RESERVATION` (skypilot-org/skypilot#3327 quotes the refusal of the converse).
  A VM that consumes a reservation needs no free capacity of the zone.
- **Preemption** (control plane): a RUNNING spot VM's metadata server shows
  `instance/preempted` TRUE for the notice (30 s on Compute Engine, "Spot VMs" of the
  TPU machine types page; the control plane shortens it), then Compute ends it as its
  `instanceTerminationAction` says: DELETE (gone) or STOP (TERMINATED, the default for
  Spot). A group under DO_NOTHING does not make it again (group_api.py). The notice is
  also Compute Engine's ACPI soft off: the guest shuts down, SIGTERM to its processes
  (workers/ssh.py). Compute Engine preempts VMs one at a time, also one VM of a group
  (a slice): `preempt_worker` picks it as tpuctl names it. Sources: "Preemption
  process", https://cloud.google.com/compute/docs/instances/spot#preemption-process, and
  https://cloud.google.com/compute/docs/instances/create-use-preemptible.
"""

from __future__ import annotations

import re
from typing import Any

from tpuctl.emulator.compute import rules, transitions
from tpuctl.emulator.compute.models import Instance, ZoneOperation
from tpuctl.emulator.core.state import State

PREEMPT_NOTICE = 30.0  # Compute Engine's notice to a spot VM
PREEMPTED_OP = "compute.instances.preempted"  # the system operation a preemption records


# -- flex-start -------------------------------------------------------------------------
def grant(state: State, instance: Instance, now: float) -> None:
    """Capacity for a PENDING VM: its create goes on."""
    instance.status, instance.pending_until = "PROVISIONING", None
    instance.begin("create", now, state.durations.get("create"))
    if instance.due(now):
        transitions._complete(state, instance, now)
    state.changed()


def _expire(state: State, instance: Instance, now: float) -> None:
    for op in state.compute.operations.values():
        if not op.done and op.target == instance.path:
            op.fail(
                now,
                transitions.STOCKOUT,
                transitions._stockout(instance.project, instance.zone),
                transitions.STOCKOUT_HTTP,
            )
    del state.compute.instances[instance.path]
    state.changed()


def tick(state: State, now: float) -> None:
    """Begin the PENDING VMs that capacity allows (a group's all together), fail those
    whose wait is over; end the preempted VMs whose notice is over."""
    for instance in list(state.compute.instances.values()):
        waiting = instance.status == "PENDING" and instance.transition is None  # not deleted
        if waiting and instance.group is None:
            if transitions._capacity_error(state, instance) is None:
                grant(state, instance, now)
            elif instance.pending_until is not None and now >= instance.pending_until:
                _expire(state, instance, now)
        ends = instance.preempt_ends
        if ends is not None and now >= ends and instance.transition is None:
            instance.preempt_ends = None
            _preempted(state, instance, ends)
    groups: dict[str, list[Instance]] = {}
    for instance in state.compute.instances.values():
        if instance.status == "PENDING" and instance.transition is None and instance.group:
            groups.setdefault(instance.group, []).append(instance)
    for members in groups.values():
        free = transitions.free_chips(state, members[0].zone, members[0].generation)
        if free is None or free >= sum(i.chips for i in members):
            for instance in members:
                grant(state, instance, now)


def advance(state: State, instance: Instance) -> bool:
    """Control plane: capacity for a PENDING VM now (a group's: all of them), or the end
    of a preemption's notice now."""
    now = state.now()
    if instance.preempt_ends is not None and instance.transition is None:
        instance.preempt_ends = None
        _preempted(state, instance, now)
        return True
    if instance.status != "PENDING" or instance.transition is not None:
        return False
    for other in list(state.compute.instances.values()):
        waiting = other.status == "PENDING" and other.transition is None
        if other is instance or (instance.group and other.group == instance.group and waiting):
            grant(state, other, now)
    return True


# -- preemption ---------------------------------------------------------------------------
def preempt(state: State, path: str, notice: float | None) -> dict[str, Any]:
    """Control plane: preempt a RUNNING spot VM (by path, or by name when only one VM
    has it): its notice, then its termination action."""
    from tpuctl.emulator.core import errors as core_errors

    found = state.compute.instances.get(path) or next(
        (i for i in state.compute.instances.values() if i.name == path), None
    )
    if found is None:
        raise core_errors.not_found(f"no Compute Engine instance {path}")
    scheduling = found.body.get("scheduling") or {}
    if scheduling.get("provisioningModel") != "SPOT" and not scheduling.get("preemptible"):
        raise core_errors.failed_precondition(f"Instance {found.name} is not a Spot VM.")
    if found.status != "RUNNING" or found.transition is not None or found.preempt_ends:
        raise core_errors.failed_precondition(
            f"Instance {found.name} is {found.shown_status(state.now())}, not RUNNING."
        )
    number = isinstance(notice, (int, float)) and not isinstance(notice, bool)
    if notice is not None and not (number and 0 <= notice <= PREEMPT_NOTICE):
        raise core_errors.invalid_argument(f"notice must be seconds from 0 to {PREEMPT_NOTICE:g}")
    now = state.now()
    found.preempted_at = now
    found.preempt_ends = now + (PREEMPT_NOTICE if notice is None else float(notice))
    state.changed()
    tick(state, now)
    return {
        "name": found.path,
        "status": found.shown_status(state.now())
        if found.path in state.compute.instances
        else "GONE",
    }


def preempt_worker(
    state: State, project: str, zone: str, name: str, worker: int | None, notice: float | None
) -> dict[str, Any]:
    """Control plane: preempt the VM of a node as tpuctl names it, a single-host VM or
    worker `worker` of a slice (a group's VMs in worker order, hosts.py), or a slice's VM
    by its own name (as `gcloud compute instances list` shows it): Compute Engine
    preempts one VM at a time, whatever group it is in."""
    from tpuctl.emulator.compute import hosts
    from tpuctl.emulator.core import errors as core_errors

    found = hosts.host(state, project, zone, name)
    if found is None:
        return _preempt_member(state, project, zone, name, worker, notice)
    count = len(found.vms)
    if worker is None and count > 1:
        raise core_errors.invalid_argument(
            f"{name} is a slice of {count} VMs: name one with worker (0 to {count - 1})"
        )
    index = 0 if worker is None else worker
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
        raise core_errors.invalid_argument(f"worker must be 0 to {count - 1} for {name}")
    vm = found.vms[index]
    if vm is None:
        raise core_errors.not_found(f"worker {index} of {name}: its VM is gone")
    return preempt(state, vm.path, notice)


def _preempt_member(
    state: State, project: str, zone: str, name: str, worker: int | None, notice: float | None
) -> dict[str, Any]:
    """A VM of a group (a slice's, or one not yet whole) named as itself: preempted as
    its worker number would preempt it; the answer names its group and worker."""
    from tpuctl.emulator.compute import hosts
    from tpuctl.emulator.core import errors as core_errors

    path = f"projects/{project}/zones/{zone}/instances/{name}"
    vm = state.compute.instances.get(path)
    if vm is None or vm.group is None:  # a VM of no group is a node itself (hosts.host)
        raise core_errors.not_found(path)
    found = [(h.node_id, k) for h in hosts.hosts(state) for k, i in enumerate(h.vms) if i is vm]
    slice_, index = found[0] if found else (None, None)
    if worker is not None and worker != index:
        where = "not yet a slice's" if slice_ is None else f"worker {index} of {slice_}"
        raise core_errors.invalid_argument(f"VM {name} is {where}: name it without worker")
    return {**preempt(state, path, notice), "slice": slice_, "worker": index}


def _preempted(state: State, instance: Instance, at: float) -> None:
    """The notice is over: Compute Engine ends the VM as its termination action says, and
    records the system operation `compute.instances.preempted` on it, by which a client
    tells a preemption from a delete once the VM is gone ("Detect preemption of Spot
    VMs": `gcloud compute operations list --filter="operationType=compute.instances.
    preempted"`, https://cloud.google.com/compute/docs/instances/create-use-spot)."""
    op = ZoneOperation.on(
        instance.project, "zones", instance.zone, PREEMPTED_OP, instance.path, instance.uid, at
    )
    op.status, op.ended = "DONE", at
    state.compute.operations[op.path] = op
    transitions._end_run(state, instance, at)


def list_operations(state: State, project: str, zone: str, query: dict[str, Any]) -> list[Any]:
    """`zoneOperations.list` of a zone, with the one filter a client uses here:
    `operationType="TYPE"` (or unquoted); any other filter is refused."""
    from tpuctl.emulator.core import errors as core_errors

    rules.check_zone(zone, project)
    text = str(query.get("filter") or "").strip()
    wanted = None
    if text:
        found = re.fullmatch(r'operationType\s*=\s*"?([\w.]+)"?', text)
        if found is None:
            raise core_errors.invalid_argument(f"Invalid list filter expression '{text}'.")
        wanted = found[1]
    scope = f"projects/{project}/zones/{zone}/operations/"
    return [
        op
        for path, op in state.compute.operations.items()
        if path.startswith(scope) and wanted in (None, op.operation_type)
    ]


def preempted(instance: Instance) -> bool:
    """What the VM's metadata server answers for `instance/preempted`."""
    return instance.preempted_at is not None
