"""A multi-host TPU slice on Compute Engine: a regional workload policy (the slice's
topology), a regional instance template and a zonal managed instance group (MIG) of one
VM per host. Their names and bodies, how the three are made, read as one `Node`, and
deleted (the MIG, then the template, then the policy, as Google's TPU operator does).

Only `cloud/compute_tpu.py` uses this. The bodies are what gcloud sends for
`compute resource-policies create workload-policy --type HIGH_THROUGHPUT
--accelerator-topology T`, `compute instance-templates create --instance-template-region`
and `compute instance-groups managed create --workload-policy
--default-action-on-vm-failure do-nothing` (tests/cli/test_gcloud_compute_compat.py).

Labels exist on instances only (the template carries them to every VM): the MIG, the
template and the policy are tpuctl's by their names and a description that says so
(`MARKER`), and tpuctl acts on no group, template or policy without both. The MIG keeps
the slice's name; the others are named after it and the zone's letter, so two slices of
one name in two zones of a region never share a policy. A policy has not even the
template's labels to go by when a create dies before its template: its description also
names its owner (`OWNED`, the `tpuctl-owner` label), so that gc knows whose it is; one
without (an older tpuctl's) is tpuctl's all the same, of no known owner.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable
from typing import Any

from tpuctl import catalog
from tpuctl.cloud import maintenance
from tpuctl.cloud.compute import wire as compute_wire
from tpuctl.errors import (
    AlreadyExistsError,
    NoCapacityError,
    NotFoundError,
    TpuctlError,
    UsageError,
)
from tpuctl.models import CreateSpec, Node, Worker

MARKER = "tpuctl: {what} of TPU slice {name} in {zone}"
OWNED = ", owned by tpuctl-owner={owner}"  # after a policy's MARKER
_OWNED = re.compile(", owned by tpuctl-owner=(?P<owner>[a-z0-9_-]{1,63})")
POLICY = "workload policy"
MAX_NAME = 58  # a MIG's baseInstanceName, which is the slice's name
Call = Callable[..., Any]  # ComputeTpuApi._call(method, path, subject, project, **kw)
# A flex-start group waits in bulk mode with no deadline of its own: its template carries
# the seconds it may wait for capacity from the group's creation (--valid-until), after
# which tpuctl ends the wait for no capacity, as Compute Engine ends a single VM's.
WAIT_FOR = "tpuctl-wait-for"


def region(zone: str) -> str:
    return catalog.region_of(zone)


def names(name: str, zone: str) -> tuple[str, str]:
    """The workload policy's and the template's names for slice `name` in `zone`."""
    letter = zone.rsplit("-", 1)[-1]
    return f"{name}-{letter}-wp", f"{name}-{letter}-it"


def marker(what: str, name: str, zone: str) -> str:
    return MARKER.format(what=what, name=name, zone=zone)


def policy_description(spec: CreateSpec, zone: str) -> str:
    """The MARKER of a slice's policy, with its owner when it has one a label can hold."""
    text = marker(POLICY, spec.name, zone)
    owned = OWNED.format(owner=spec.owner)
    return text + owned if _OWNED.fullmatch(owned) else text


def policy_owner(resource: dict[str, Any]) -> str | None:
    """The owner (`tpuctl-owner`) a policy's description names; None: none named."""
    m = _OWNED.search(str(resource.get("description", "")))
    return m["owner"] if m else None


def paths(project: str, zone: str, name: str) -> tuple[str, str, str]:
    """The MIG's, the template's and the policy's paths."""
    policy, template = names(name, zone)
    r = region(zone)
    return (
        f"projects/{project}/zones/{zone}/instanceGroupManagers/{name}",
        f"projects/{project}/regions/{r}/instanceTemplates/{template}",
        f"projects/{project}/regions/{r}/resourcePolicies/{policy}",
    )


def check_name(spec: CreateSpec, zone: str) -> None:
    longest = 63 - len(names("", zone)[1])
    if len(spec.name) > min(MAX_NAME, longest):
        raise UsageError(
            f"node name {spec.name!r} is too long for a multi-host slice on Compute Engine",
            hint=f"at most {min(MAX_NAME, longest)} characters: its VMs, instance template "
            "and workload policy are named after it",
        )


# -- bodies ------------------------------------------------------------------------
def policy_body(spec: CreateSpec, zone: str) -> dict[str, Any]:
    return {
        "name": names(spec.name, zone)[0],
        "region": region(zone),
        "description": policy_description(spec, zone),
        "workloadPolicy": {"type": "HIGH_THROUGHPUT", "acceleratorTopology": spec.shape.topology},
    }


def template_body(spec: CreateSpec, zone: str) -> dict[str, Any]:
    properties = compute_wire.instance_body(spec, zone)
    del properties["name"]
    properties.pop("description", None)
    properties.pop("params", None)  # an insert's own: a group's VMs wait as the group says
    properties["machineType"] = spec.shape.machine_type  # a template's is a bare name
    if spec.flex_start and spec.capacity_wait:
        properties["labels"] = {**properties.get("labels", {}), WAIT_FOR: str(spec.capacity_wait)}
    return {
        "name": names(spec.name, zone)[1],
        "region": region(zone),
        "description": marker("instance template", spec.name, zone),
        "properties": properties,
    }


def group_body(spec: CreateSpec, project: str, zone: str) -> dict[str, Any]:
    _mig, template, policy = paths(project, zone, spec.name)
    body: dict[str, Any] = {
        "name": spec.name,
        "zone": zone,
        "description": marker("managed instance group", spec.name, zone),
        "instanceTemplate": template,
        "targetSize": spec.shape.hosts,
        "resourcePolicies": {"workloadPolicy": policy},
        # one lost worker breaks the slice's interconnect: never recreate one under a job
        "instanceLifecyclePolicy": {"defaultActionOnFailure": "DO_NOTHING"},
    }
    if spec.flex_start:
        # all the slice's VMs at once, or none: bulk mode, which Compute Engine offers for
        # flex-start and reservation-bound templates only (About bulk mode,
        # https://cloud.google.com/compute/docs/instance-groups/about-bulk-mode;
        # `gcloud alpha compute instance-groups managed create --target-size-policy-mode bulk`)
        body["targetSizePolicy"] = {"mode": "BULK"}
    return body


# -- making it ----------------------------------------------------------------------
def create(
    call: Call,
    wait: Callable[[dict[str, Any], str], None],
    project: str,
    spec: CreateSpec,
    zone: str,
) -> dict[str, Any]:
    """Make the policy and the template (waiting for each), then ask for the MIG: its
    zone operation ({} when the group was adopted: `_insert`). A failure on the way
    deletes what this call made, then raises."""
    check_name(spec, zone)
    r = region(zone)
    steps = (
        (
            f"projects/{project}/regions/{r}/resourcePolicies",
            policy_body(spec, zone),
            "workload policy",
        ),
        (
            f"projects/{project}/regions/{r}/instanceTemplates",
            template_body(spec, zone),
            "instance template",
        ),
    )
    made: list[str] = []
    try:
        for path, body, what in steps:
            op = _insert(call, project, path, body, what, spec, zone)
            if op:  # {}: adopted, made by a lost first attempt (gc's, if this fails)
                wait(op, f"{what} {body['name']}")
                made.append(f"{path}/{body['name']}")
        groups = f"projects/{project}/zones/{zone}/instanceGroupManagers"
        # its operation: the group's VMs come once its insert is done
        return _insert(call, project, groups, group_body(spec, project, zone), GROUP, spec, zone)
    except BaseException:
        for path in reversed(made):
            _delete_quietly(call, wait, project, path)
        raise


GROUP = "managed instance group"


def _insert(
    call: Call,
    project: str,
    path: str,
    body: dict[str, Any],
    what: str,
    spec: CreateSpec,
    zone: str,
) -> dict[str, Any]:
    """Insert one part with a `requestId` of its own (`wire.once`): its operation, or {}
    when the part exists already and is this create's own (a first attempt whose answer
    was lost made it: adopted, as the Cloud TPU API's adapter adopts a node)."""
    subject = f"{what} {body['name']}"
    try:
        return dict(call("POST", path, subject, project, json=body, params=compute_wire.once()))
    except AlreadyExistsError:
        found = call("GET", f"{path}/{body['name']}", subject, project)
        if not _made_by(found, what, spec, project, zone):
            raise
        return {}


def _made_by(found: dict[str, Any], what: str, spec: CreateSpec, project: str, zone: str) -> bool:
    """Whether a part found under the name this create gives it is this create's: tpuctl's
    description of this slice, and for the template this create's labels (the second it
    was made included), for the group this create's template, for the policy no other
    owner's."""
    if not ours(found, what, spec.name, zone):
        return False
    if what == "instance template":
        return compute_wire.made_by(found, spec)
    if what == GROUP:
        template = paths(project, zone, spec.name)[1]
        return str(found.get("instanceTemplate", "")).endswith(template)
    # a policy has no labels: its name and its description (and the owner, if it names one)
    return policy_owner(found) in (None, spec.owner)


def _delete_quietly(
    call: Call, wait: Callable[[dict[str, Any], str], None], project: str, path: str
) -> None:
    with contextlib.suppress(NotFoundError):
        op = call("DELETE", path, path.rsplit("/", 1)[-1], project, params=compute_wire.once())
        wait(op, path)


# -- reading it ---------------------------------------------------------------------
def ours(resource: dict[str, Any], what: str, name: str, zone: str) -> bool:
    """Whether `resource` is tpuctl's `what` of slice `name` in `zone` by its description:
    MARKER, and for a policy MARKER and its owner (`OWNED`) too."""
    text, mark = str(resource.get("description", "")), marker(what, name, zone)
    if text == mark:
        return True
    rest = text[len(mark) :] if text.startswith(mark) else ""
    return what == POLICY and _OWNED.fullmatch(rest) is not None


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
