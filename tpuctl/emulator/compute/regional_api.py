"""Compute Engine's `resourcePolicies` (workload policies), `instanceTemplates` (global
and regional) and the region and global operations: what a slice's group is made from,
as functions over the emulator's `State` (`state.compute`). The groups that use them are
group_api.py's; see group_models.py for the invariants, api.py for how a method is called.

Wordings: a resource another one uses cannot be deleted, `The instance_template resource
'projects/P/global/instanceTemplates/T' is already being used by
'projects/P/zones/Z/instanceGroupManagers/M'` (400 resourceInUseByAnotherResource, as
gcloud prints it, e.g. hashicorp/terraform-provider-google#6277; pulumi/pulumi-gcp#680
shows the full paths).
"""

from __future__ import annotations

import copy
import re
from typing import Any

from tpuctl.emulator.compute import api, catalog, errors, rules, transitions
from tpuctl.emulator.compute.errors import ComputeError
from tpuctl.emulator.compute.group_models import Policy, Template
from tpuctl.emulator.compute.models import ZoneOperation
from tpuctl.emulator.core.state import State
from tpuctl.emulator.tpu.models import project_number
from tpuctl.emulator.tpu.rules import page

WORKLOAD_TYPES = ("HIGH_AVAILABILITY", "HIGH_THROUGHPUT")
TOPOLOGY_MODES = ("AUTO_CONNECT", "PROVISION_ONLY")
ON_FAILURE = ("REPAIR", "DO_NOTHING")
SIZE_MODES = ("INDIVIDUAL", "BULK")
TOPOLOGY = re.compile(r"[1-9]\d*(x[1-9]\d*){1,2}")


def regions() -> list[str]:
    return sorted({z.rsplit("-", 1)[0] for z in catalog.zones()})


def check_region(region: str) -> None:
    if region not in regions():
        raise errors.invalid_value("region", region, "Unknown region.")


def in_use(kind: str, path: str, by: str) -> ComputeError:
    return ComputeError(
        400,
        "resourceInUseByAnotherResource",
        f"The {kind} resource '{path}' is already being used by '{by}'",
    )


def done(
    state: State, project: str, kind: str, where: str, op_type: str, target: str, target_id: str
) -> ZoneOperation:
    """A policy's or template's operation: metadata only, DONE at once."""
    op = ZoneOperation.on(project, kind, where, op_type, target, target_id, state.now())
    op.succeed(state.now())
    transitions._keep(state, op)
    return op


def found(store: dict[str, Any], path: str) -> Any:
    if path not in store:
        raise errors.not_found(path)
    return store[path]


# -- workload policies ---------------------------------------------------------------
def insert_policy(state: State, project: str, region: str, body: dict[str, Any]) -> ZoneOperation:
    check_region(region)
    name = rules.check_name(body.get("name"))
    workload = body.get("workloadPolicy")
    if not isinstance(workload, dict):
        raise errors.bad_request("This emulator serves workload policies only (workloadPolicy).")
    kind = workload.get("type")
    if kind not in WORKLOAD_TYPES:
        raise errors.invalid_value("resource.workloadPolicy.type", kind, "")
    topology = workload.get("acceleratorTopology")
    if topology is not None and not TOPOLOGY.fullmatch(str(topology)):
        raise errors.invalid_value("resource.workloadPolicy.acceleratorTopology", topology, "")
    mode = workload.get("acceleratorTopologyMode")
    if mode is not None and mode not in TOPOLOGY_MODES:
        raise errors.invalid_value("resource.workloadPolicy.acceleratorTopologyMode", mode, "")
    if topology is not None:
        workload = {"acceleratorTopologyMode": "AUTO_CONNECT", **workload}  # the default
    policy = Policy(
        project, region, name, dict(workload), str(body.get("description") or ""), state.now()
    )
    if policy.path in state.compute.policies:
        raise errors.already_exists(policy.path)
    state.compute.policies[policy.path] = policy
    return done(state, project, "regions", region, "insert", policy.path, policy.uid)


def get_policy(state: State, project: str, region: str, name: str) -> Policy:
    check_region(region)
    policy: Policy = found(
        state.compute.policies, f"projects/{project}/regions/{region}/resourcePolicies/{name}"
    )
    return policy


def delete_policy(state: State, project: str, region: str, name: str) -> ZoneOperation:
    policy = get_policy(state, project, region, name)
    user = next((g for g in state.compute.groups.values() if g.policy == policy.path), None)
    if user is not None:
        raise in_use("resource_policy", policy.path, user.path)
    del state.compute.policies[policy.path]
    return done(state, project, "regions", region, "delete", policy.path, policy.uid)


def policies(state: State, project: str, region: str | None) -> list[Policy]:
    return sorted(
        (
            p
            for p in state.compute.policies.values()
            if p.project == project and (region is None or p.region == region)
        ),
        key=lambda p: p.path,
    )


# -- instance templates ---------------------------------------------------------------
def insert_template(state: State, project: str, region: str, body: dict[str, Any]) -> ZoneOperation:
    """`region` "" for a global template."""
    if region:
        check_region(region)
    name = rules.check_name(body.get("name"))
    props = body.get("properties")
    if not isinstance(props, dict) or not props.get("machineType"):
        raise errors.invalid_value("resource.properties.machineType", "", "Required.")
    if "/" in str(props["machineType"]):
        # a template names its machine type bare: it is not in any zone yet
        why = "Must be a machine type name, not a URL."
        raise errors.invalid_value("resource.properties.machineType", props["machineType"], why)
    kept = copy.deepcopy(props)
    # the live-migration rule is a machine type's with accelerators (a TPU type here), not
    # every template's: an e2-standard-4 migrates (Instance.scheduling, v1 reference)
    tpus = props["machineType"] in catalog.MACHINE_TYPES or bool(props.get("guestAccelerators"))
    kept["scheduling"] = rules.check_scheduling(props.get("scheduling"), accelerators=tpus)
    kept["metadata"] = rules.check_metadata(props.get("metadata"))
    kept["labels"] = rules.check_labels(props.get("labels"), "resource.properties.labels")
    for account in kept.get("serviceAccounts") or []:
        if isinstance(account, dict) and account.get("email") == "default":
            account["email"] = f"{project_number(project)}-compute@developer.gserviceaccount.com"
    template = Template(
        project, region, name, kept, str(body.get("description") or ""), state.now()
    )
    if template.path in state.compute.templates:
        raise errors.already_exists(template.path)
    state.compute.templates[template.path] = template
    kind = "regions" if region else "global"
    return done(state, project, kind, region, "insert", template.path, template.uid)


def get_template(state: State, project: str, region: str, name: str) -> Template:
    if region:
        check_region(region)
    scope = f"regions/{region}" if region else "global"
    template: Template = found(
        state.compute.templates, f"projects/{project}/{scope}/instanceTemplates/{name}"
    )
    return template


def delete_template(state: State, project: str, region: str, name: str) -> ZoneOperation:
    template = get_template(state, project, region, name)
    user = next((g for g in state.compute.groups.values() if g.template == template.path), None)
    if user is not None:
        raise in_use("instance_template", template.path, user.path)
    del state.compute.templates[template.path]
    kind = "regions" if region else "global"
    return done(state, project, kind, region, "delete", template.path, template.uid)


def templates(state: State, project: str, region: str | None) -> list[Template]:
    """`region` None: every template (global and regional); "" the global ones."""
    return sorted(
        (
            t
            for t in state.compute.templates.values()
            if t.project == project and (region is None or t.region == region)
        ),
        key=lambda t: t.path,
    )


# -- operations outside zones ------------------------------------------------------------
def get_operation(state: State, project: str, kind: str, where: str, name: str) -> ZoneOperation:
    if kind == "regions":
        check_region(where)
    scope = "global" if kind == "global" else f"{kind}/{where}"
    op: ZoneOperation = found(
        state.compute.operations, f"projects/{project}/{scope}/operations/{name}"
    )
    return op


def paged(items: list[Any], max_results: str, token: str) -> tuple[list[Any], str | None]:
    return page(items, api._max(max_results), token)
