"""A multi-host TPU slice on Compute Engine: a regional workload policy (the slice's
topology), a regional instance template and a zonal managed instance group (MIG) of one
VM per host. Their names and bodies, and how the three are made and deleted (the MIG,
then the template, then the policy, as Google's TPU operator does); read as one `Node`
in `slice_state.py`.

Only the Compute Engine adapter (cloud/compute/) uses this. The bodies are what gcloud sends for
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
from collections.abc import Callable
from typing import Any

from tpuctl import catalog
from tpuctl.cloud.compute import wire as compute_wire
from tpuctl.errors import (
    AlreadyExistsError,
    NotFoundError,
    UsageError,
)
from tpuctl.models import CreateSpec

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


# -- knowing it by its description --------------------------------------------------
def ours(resource: dict[str, Any], what: str, name: str, zone: str) -> bool:
    """Whether `resource` is tpuctl's `what` of slice `name` in `zone` by its description:
    MARKER, and for a policy MARKER and its owner (`OWNED`) too."""
    text, mark = str(resource.get("description", "")), marker(what, name, zone)
    if text == mark:
        return True
    rest = text[len(mark) :] if text.startswith(mark) else ""
    return what == POLICY and _OWNED.fullmatch(rest) is not None
