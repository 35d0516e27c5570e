"""Compute Engine's `instanceGroupManagers` (zonal MIGs) as functions over the emulator's
`State` (`state.compute`): a group made from a template and a workload policy
(regional_api.py), its VMs made and remade as capacity allows (`tick`). See
group_models.py for the invariants, api.py for how a method is called.

What Compute answers for a workload policy whose topology does not fit the group is not
documented: the wording here is the emulator's own (contributing/emulator-fidelity.md).
"""

from __future__ import annotations

import copy
import re
import secrets
from typing import Any

from tpuctl.emulator.compute import admission, catalog, errors, rules, transitions
from tpuctl.emulator.compute.errors import ComputeError
from tpuctl.emulator.compute.group_models import Group, Policy, Template
from tpuctl.emulator.compute.models import Instance, ZoneOperation
from tpuctl.emulator.compute.regional_api import (
    ON_FAILURE,
    SIZE_MODES,
    found,
)
from tpuctl.emulator.core.state import State
from tpuctl.emulator.tpu.models import project_number


# -- managed instance groups ------------------------------------------------------------
def _resource_path(project: str, value: Any, field_name: str, kind: str) -> str:
    """`projects/P/.../KIND/NAME` from a full or partial URL of a resource of `project`."""
    text = str(value or "")
    match = re.search(rf"(?:^|/)((?:regions/[^/]+|global)/{kind}/[^/]+)$", text)
    if not match:
        raise errors.invalid_value(field_name, text, f"Must be a URL of a {kind} resource.")
    return f"projects/{project}/{match.group(1)}"


def insert_group(state: State, project: str, zone: str, body: dict[str, Any]) -> ZoneOperation:
    rules.check_zone(zone, project)
    name = rules.check_name(body.get("name"))
    path = f"projects/{project}/zones/{zone}/instanceGroupManagers/{name}"
    if path in state.compute.groups:
        raise errors.already_exists(path)
    template_path = _resource_path(
        project, body.get("instanceTemplate"), "resource.instanceTemplate", "instanceTemplates"
    )
    template: Template = found(state.compute.templates, template_path)
    mtype = rules.machine_type(
        zone, f"zones/{zone}/machineTypes/{template.properties['machineType']}"
    )
    size = body.get("targetSize", 0)
    try:
        size = int(size)
    except (TypeError, ValueError):
        raise errors.invalid_value("resource.targetSize", size, "Must be a number.") from None
    if not 0 <= size <= 1000:
        raise errors.invalid_value("resource.targetSize", size, "Must be between 0 and 1000.")
    base = body.get("baseInstanceName") or name
    if not isinstance(base, str) or len(base) > 58 or not rules.NAME.fullmatch(base):
        raise errors.invalid_value("resource.baseInstanceName", base, rules.NAME_WHY)
    policy_path = ""
    wanted = (body.get("resourcePolicies") or {}).get("workloadPolicy")
    if wanted:
        policy_path = _resource_path(
            project, wanted, "resource.resourcePolicies.workloadPolicy", "resourcePolicies"
        )
        policy: Policy = found(state.compute.policies, policy_path)
        if policy.region != zone.rsplit("-", 1)[0]:
            raise errors.bad_request(
                f"The workload policy '{policy_path}' is not in the region of zone '{zone}'."
            )
        _check_topology(policy, mtype.chips, mtype.generation, size)
    _check_size_policy(body, template)
    on_failure = (body.get("instanceLifecyclePolicy") or {}).get("defaultActionOnFailure", "REPAIR")
    if on_failure not in ON_FAILURE:
        raise errors.invalid_value(
            "resource.instanceLifecyclePolicy.defaultActionOnFailure", on_failure, ""
        )
    group = Group(
        project,
        zone,
        name,
        base,
        template_path,
        size,
        policy_path,
        on_failure,
        copy.deepcopy(body),
        state.now(),
    )
    state.compute.groups[path] = group
    op = ZoneOperation.on(project, "zones", zone, "insert", path, group.uid, state.now())
    op.succeed(state.now())  # DONE before any VM exists: they come at the next tick
    transitions._keep(state, op)
    return op


def _check_size_policy(body: dict[str, Any], template: Template) -> None:
    """Bulk mode only with flex-start or reservation-bound templates ("About bulk mode",
    https://cloud.google.com/compute/docs/instance-groups/about-bulk-mode); a flex-start
    template only in bulk mode (or through resize requests, which this emulator does not
    serve). The wordings are the emulator's."""
    mode = (body.get("targetSizePolicy") or {}).get("mode", "INDIVIDUAL")
    if mode not in SIZE_MODES:
        raise errors.invalid_value("resource.targetSizePolicy.mode", mode, "")
    model = (template.properties.get("scheduling") or {}).get("provisioningModel", "STANDARD")
    if mode == "BULK" and model not in ("FLEX_START", "RESERVATION_BOUND"):
        raise errors.bad_request(
            "Target size policy mode BULK is supported only with instance templates whose "
            f"provisioning model is FLEX_START or RESERVATION_BOUND, not {model}."
        )
    if model == "FLEX_START" and mode != "BULK":
        raise errors.bad_request(
            "An instance template with provisioning model FLEX_START needs target size policy "
            "mode BULK (or resize requests)."
        )


def _check_topology(policy: Policy, chips_per_vm: int, generation: str, size: int) -> None:
    topology = policy.workload.get("acceleratorTopology")
    if not topology:
        return
    chips = 1
    for part in topology.split("x"):
        chips *= int(part)
    wanted_vms = chips // chips_per_vm if chips_per_vm else 0
    if size != wanted_vms or chips % max(chips_per_vm, 1):
        raise errors.bad_request(
            f"Accelerator topology {topology} of workload policy '{policy.path}' needs "
            f"{wanted_vms} VMs of {chips_per_vm} {generation} chips; the group's target size "
            f"is {size}."
        )


def get_group(state: State, project: str, zone: str, name: str) -> Group:
    rules.check_zone(zone, project)
    group: Group = found(
        state.compute.groups, f"projects/{project}/zones/{zone}/instanceGroupManagers/{name}"
    )
    return group


def delete_group(state: State, project: str, zone: str, name: str) -> ZoneOperation:
    group = get_group(state, project, zone, name)
    group.deleting = True
    op = ZoneOperation.on(project, "zones", zone, "delete", group.path, group.uid, state.now())
    transitions._keep(state, op)
    for slot in group.slots:
        instance = state.compute.instances.get(group.instance_path(slot))
        if instance is not None and instance.transition != "delete":
            instance.capacity_error = None
            instance.begin("delete", state.now(), state.durations.get("delete"))
    tick(state, state.now())
    return op


def groups(state: State, project: str, zone: str | None) -> list[Group]:
    return sorted(
        (
            g
            for g in state.compute.groups.values()
            if g.project == project and (zone is None or g.zone == zone)
        ),
        key=lambda g: g.path,
    )


def members(state: State, group: Group) -> list[tuple[dict[str, Any], Instance | None]]:
    """Each slot with its VM (None: not made, or gone)."""
    return [(s, state.compute.instances.get(group.instance_path(s))) for s in group.slots]


# -- transitions ---------------------------------------------------------------------
def tick(state: State, now: float) -> None:
    """Make the VMs groups are due, end the groups whose delete is done."""
    for group in list(state.compute.groups.values()):
        if group.deleting:
            if all(i is None for _s, i in members(state, group)):
                del state.compute.groups[group.path]
                for op in state.compute.operations.values():
                    if not op.done and op.target == group.path:
                        op.succeed(now)
                state.changed()
            continue
        if not group.spawned:
            group.spawned = True
            group.slots = [
                {"name": _member_name(state, group), "worker": w, "error": None, "lost": False}
                for w in range(group.target_size)
            ]
            state.changed()
            continue  # the insert's answer saw no VM; they are made from the next tick on
        for slot, instance in members(state, group):
            if instance is None and not slot["lost"]:
                if slot.get("made") and group.on_failure == "DO_NOTHING":
                    slot["lost"] = True  # its VM went away; the group does not repair
                    state.changed()
                else:
                    _make(state, group, slot)


def _member_name(state: State, group: Group) -> str:
    taken = {s["name"] for s in group.slots}
    while True:
        name = f"{group.base}-{''.join(secrets.choice('abcdefghijklmnopqrstuvwxyz0123456789') for _ in range(4))}"  # noqa: E501
        path = f"projects/{group.project}/zones/{group.zone}/instances/{name}"
        if name not in taken and path not in state.compute.instances:
            return name


def _make(state: State, group: Group, slot: dict[str, Any]) -> None:
    """Try to make a slot's VM from the group's template: no capacity leaves the slot with
    its last attempt's error, tried again at the next tick."""
    template = state.compute.templates.get(group.template)
    if template is None:
        return
    props = copy.deepcopy(template.properties)
    mtype = catalog.machine_type(group.zone, str(props["machineType"]))
    if mtype is None:
        return
    extra = (group.body.get("allInstancesConfig") or {}).get("properties") or {}
    items = [
        i for i in props["metadata"]["items"] if i.get("key") not in ("created-by", "worker-id")
    ]
    for key, value in (extra.get("metadata") or {}).items():
        items = [i for i in items if i.get("key") != key] + [{"key": key, "value": str(value)}]
    number = project_number(group.project)
    items += [
        {
            "key": "created-by",
            "value": f"projects/{number}/zones/{group.zone}/instanceGroupManagers/{group.name}",
        },  # noqa: E501
        # the worker's number, as a TPU7x slice made by a MIG shows it
        # (contributing/emulator-fidelity.md)
        {"key": "worker-id", "value": str(slot["worker"])},
    ]
    props["metadata"] = {"items": items}
    labels = {**props.pop("labels", {}), **(extra.get("labels") or {})}
    props["name"] = slot["name"]
    (address,) = state.allocator.allocate(1)
    instance = Instance(
        group.project,
        group.zone,
        slot["name"],
        mtype.name,
        mtype.generation,
        mtype.chips,
        props,
        state.now(),
        address,
        labels=labels,
        group=group.path,
    )
    try:
        admission.consume(
            state,
            instance,
            props.get("reservationAffinity"),
            "resource.properties.reservationAffinity",
        )
    except ComputeError as e:
        slot["error"] = {"code": "invalid", "message": e.message}
        return
    quota = transitions.quota_error(state, instance)
    flex = admission.flex(props)
    error = None if quota or flex else transitions._capacity_error(state, instance)
    if quota is not None or error is not None:
        slot["error"] = quota or {"code": transitions.STOCKOUT, "message": error}
        return
    slot["error"], slot["made"] = None, True
    state.compute.instances[instance.path] = instance
    if flex:  # the group begins its VMs together, when there is room for all
        admission.hold(state, instance, None)
        return
    instance.begin("create", state.now(), state.durations.get("create"))
    if instance.due(state.now()):
        transitions._complete(state, instance, state.now())
    state.changed()


def topology_state(state: State, group: Group) -> str | None:
    """The state of the group's accelerator topology (ACTIVATING, ACTIVE, INCOMPLETE,
    DEACTIVATING), or None without a workload policy topology."""
    policy = state.compute.policies.get(group.policy)
    if policy is None or not policy.workload.get("acceleratorTopology"):
        return None
    if group.deleting:
        return "DEACTIVATING"
    now = state.now()
    statuses = [i.shown_status(now) if i else None for _s, i in members(state, group)]
    if group.spawned and statuses and all(s == "RUNNING" for s in statuses):
        return "ACTIVE"
    # a VM lost or stopped (a spot VM preempted): "insufficient number of running VMs"
    lost = any(s["lost"] for s in group.slots) or "TERMINATED" in statuses
    return "INCOMPLETE" if lost else "ACTIVATING"


def all_resources(state: State) -> list[dict[str, str]]:
    """Every group, template and policy, as the control plane lists them beside the
    instances: path and what it is."""
    kinds = (
        ("INSTANCE_GROUP_MANAGER", state.compute.groups),
        ("INSTANCE_TEMPLATE", state.compute.templates),
        ("WORKLOAD_POLICY", state.compute.policies),
    )
    return [{"name": path, "status": kind} for kind, store in kinds for path in sorted(store)]
