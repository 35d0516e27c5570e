"""A multi-host TPU slice on Compute Engine read as one `Node`: its VMs in worker order,
its state from its group's and theirs, what a create or delete left of it (a template or
policy with no group), and why its group cannot have its VMs (no capacity, no quota, a
flex-start wait that ended). Its names and bodies, and how it is made, are
`slices.py`'s."""

from __future__ import annotations

import re
import time
from typing import Any

from tpuctl import catalog
from tpuctl.cloud import maintenance
from tpuctl.cloud.compute import wire as compute_wire
from tpuctl.cloud.compute.slices import WAIT_FOR
from tpuctl.errors import (
    NoCapacityError,
    TpuctlError,
)
from tpuctl.models import Node, Worker


def worker_number(instance: dict[str, Any]) -> int | None:
    """A slice VM's worker number, from its metadata (`worker-id`, or the TPU API's
    `agent-worker-number`), not its name, which the MIG suffixes at random."""
    items = (instance.get("metadata") or {}).get("items") or []
    found = {str(i.get("key")): str(i.get("value")) for i in items}
    for key in ("agent-worker-number", "worker-id"):
        if found.get(key, "").isdigit():
            return int(found[key])
    return None


def group_of(instance: dict[str, Any]) -> str | None:
    """The name of the MIG that made `instance` (its `created-by` metadata), or None."""
    items = (instance.get("metadata") or {}).get("items") or []
    for item in items:
        if item.get("key") == "created-by":
            match = re.search(r"/instanceGroupManagers/([^/]+)$", str(item.get("value")))
            return match.group(1) if match else None
    return None


def in_order(instances: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """VMs in worker order (by name where a VM shows no number)."""

    def key(instance: dict[str, Any]) -> tuple[int, str]:
        number = worker_number(instance)
        return (1 << 30 if number is None else number, str(instance.get("name")))

    return sorted(instances, key=key)


def node(
    group: dict[str, Any],
    managed: list[dict[str, Any]] | None,
    instances: list[dict[str, Any]],
    project: str,
) -> Node:
    """The slice as one Node: workers in worker order, state from the VMs, the MIG's
    actions and its accelerator topology. `managed` (listManagedInstances) may be None
    in a list, which reads groups and instances only."""
    zone = str(group.get("zone", "")).rsplit("/", 1)[-1]
    vms = in_order(instances)
    size = int(group.get("targetSize") or 0)
    first = compute_wire.node_from_instance(vms[0], project) if vms else None
    shape = _shape(vms, size)
    status = group.get("status") or {}
    topology: dict[str, Any] = next(iter(status.get("appliedAcceleratorTopologies") or []), {})
    actions = group.get("currentActions") or {}
    state, health = _state(vms, size, topology.get("state"), actions, first, waits_in_bulk(group))
    workers = []
    for n, vm in enumerate(vms):
        nics = vm.get("networkInterfaces") or [{}]
        nat = [a.get("natIP") for a in nics[0].get("accessConfigs") or [] if a.get("natIP")]
        workers.append(
            Worker(
                n,
                str(nics[0].get("networkIP", "")),
                nat[0] if nat else None,
                str(vm.get("id", "")),
                str(vm.get("name", "")),
            )
        )
    created = group.get("creationTimestamp")
    from tpuctl.timestamps import parse_rfc3339

    return Node(
        name=str(group.get("name", "")),
        project=project,
        zone=zone,
        accelerator_type=shape.name if shape else f"{size} VMs",
        state=state,
        runtime_version="",
        labels=dict(first.labels) if first else {},
        metadata=dict(first.metadata) if first else {},
        workers=workers,
        create_time=parse_rfc3339(str(created)) if created else None,
        spot=first.spot if first else False,
        flex_start=first.flex_start if first else waits_in_bulk(group),
        preemptible=first.preemptible if first else False,
        description=str(group.get("description", "")),
        health_description=health,
        api="compute",
        shape=shape,
        maintenance=maintenance.first(
            [compute_wire.node_from_instance(vm, project).maintenance for vm in vms]
        ),
        topology=" ".join(
            filter(None, (topology.get("acceleratorTopology"), topology.get("state")))
        ),
        raw={"group": group, "managed": managed, "instances": vms},
    )


def _shape(vms: list[dict[str, Any]], hosts: int) -> catalog.SliceShape | None:
    machine = str(vms[0].get("machineType", "")).rsplit("/", 1)[-1] if vms else ""
    return next(
        (s for s in catalog.SHAPES.values() if s.machine_type == machine and s.hosts == hosts), None
    )


def _state(
    vms: list[dict[str, Any]],
    size: int,
    topology: str | None,
    actions: dict[str, Any],
    first: Node | None,
    flex: bool = False,
) -> tuple[str, str]:
    statuses = [str(v.get("status", "")) for v in vms]
    if int(actions.get("deleting") or 0) or topology == "DEACTIVATING":
        return "DELETING", ""
    if len(vms) == size and all(s == "RUNNING" for s in statuses) and topology in (None, "ACTIVE"):
        return "READY", ""
    creating = int(actions.get("creating") or 0)
    waiting = statuses.count("PENDING")
    if waiting or (flex and len(vms) < size and topology != "INCOMPLETE"):
        count = size - len(vms) + waiting
        return "WAITING_FOR_RESOURCES", f"flex-start: {count} of {size} VMs waiting for capacity"
    if topology == "INCOMPLETE" or (len(vms) < size and not creating):
        stopped = statuses.count("TERMINATED")  # e.g. a spot VM preempted, STOP its action
        why = f"{size - len(vms)} of {size} VMs lost" + (f", {stopped} stopped" if stopped else "")
        why += "; the group does not recreate them"
        return ("PREEMPTED" if first and first.spot else "TERMINATED"), why
    return "CREATING", f"{statuses.count('RUNNING')} of {size} VMs running"


def waits_in_bulk(group: dict[str, Any]) -> bool:
    """A flex-start slice's group: in bulk mode, it waits for capacity for all its VMs."""
    return (group.get("targetSizePolicy") or {}).get("mode") == "BULK"


def leftovers(
    project: str, zone: str, name: str, template: dict | None, policy: dict | None
) -> Node:
    """A slice whose MIG is gone but whose template or policy is left (a create or a
    delete that did not finish): no node, to be deleted."""
    parts = [
        (what, r)
        for what, r in (("instance template", template), ("workload policy", policy))
        if r is not None
    ]
    left = [what for what, _r in parts]
    named = [f"{what} {r.get('name', '')}" for what, r in parts]
    return Node(
        name=name,
        project=project,
        zone=zone,
        accelerator_type="",
        state="TERMINATED",
        runtime_version="",
        health_description=f"no VMs: only its {' and '.join(left)} left",
        api="compute",
        free_parts=f"its {' and '.join(named)}",  # they bill nothing: only VMs and disks do
        raw={"template": template, "policy": policy},
    )


def wait_ended(group: dict[str, Any], template: dict[str, Any], subject: str) -> TpuctlError | None:
    """A NoCapacityError once the flex-start `group` has waited for capacity as long as
    its `template` allows (`WAIT_FOR`, counted from the group's creation); None before,
    or with no such wait."""
    labels = (template.get("properties") or {}).get("labels") or {}
    seconds, created = str(labels.get(WAIT_FOR, "")), str(group.get("creationTimestamp") or "")
    if not seconds.isdigit() or not created:
        return None
    from tpuctl.timestamps import parse_rfc3339

    try:
        began = parse_rfc3339(created).timestamp()
    except ValueError:
        return None
    if time.time() < began + int(seconds):
        return None
    return NoCapacityError(
        f"no capacity for {subject} before its wait ended (--valid-until {seconds}s)",
        hint="try another zone that offers it, a longer --valid-until, or again later",
    )


def capacity_error(managed: list[dict[str, Any]], subject: str) -> TpuctlError | None:
    """The first creation error a managed VM reports (no capacity, no quota), as tpuctl's:
    the group would retry for ever; tpuctl stops at the first, to try elsewhere."""
    for vm in managed:
        errors = (((vm.get("lastAttempt") or {}).get("errors") or {}).get("errors")) or []
        if errors:
            return compute_wire.operation_error({"error": {"errors": errors}}, subject)
    return None
