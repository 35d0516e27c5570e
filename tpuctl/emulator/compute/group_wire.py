"""The wire format of a slice's resources: workload policies, instance templates and
managed instance groups with `listManagedInstances` (`GroupRenderer`). Field names and
shapes: Compute Engine's v1 REST reference (ResourcePolicy, InstanceTemplate,
InstanceGroupManager with the TPU fields `status.appliedAcceleratorTopologies` and
`status.currentInstanceStatuses`, ManagedInstance); see front.py for timestamps and
links. `group_front.py` serves them."""

from __future__ import annotations

from collections import Counter
from typing import Any

from tpuctl.emulator.compute import group_api
from tpuctl.emulator.compute.front import Renderer, timestamp
from tpuctl.emulator.compute.group_models import Group, Policy, Template
from tpuctl.emulator.compute.models import fingerprint
from tpuctl.emulator.core.state import State

# a managed VM's status -> currentInstanceStatuses' key
_STATUS_KEYS = {
    "PROVISIONING": "provisioning",
    "STAGING": "staging",
    "RUNNING": "running",
    "STOPPING": "stopping",
    "TERMINATED": "terminated",
    "PENDING": "pending",  # a flex-start VM waiting for capacity
}


_ACTIONS = (
    "abandoning",
    "creating",
    "creatingWithoutRetries",
    "deleting",
    "none",
    "recreating",
    "refreshing",
    "restarting",
    "resuming",
    "starting",
    "stopping",
    "suspending",
    "verifying",
)


class GroupRenderer(Renderer):
    def policy(self, p: Policy) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "compute#resourcePolicy",
            "id": p.uid,
            "creationTimestamp": timestamp(p.created),
            "selfLink": self.link(p.path),
            "region": self.link(f"projects/{p.project}/regions/{p.region}"),
            "name": p.name,
            "status": "READY",
            "workloadPolicy": dict(p.workload),
        }
        if p.description:
            out["description"] = p.description
        return out

    def template(self, t: Template) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "compute#instanceTemplate",
            "id": t.uid,
            "creationTimestamp": timestamp(t.created),
            "name": t.name,
            "properties": t.properties,
            "selfLink": self.link(t.path),
        }
        if t.region:
            out["region"] = self.link(f"projects/{t.project}/regions/{t.region}")
        if t.description:
            out["description"] = t.description
        return out

    def managed(self, state: State, g: Group) -> list[dict[str, Any]]:
        """`listManagedInstances`: each slot, with its VM's status, action and last error."""
        out = []
        for slot, instance in group_api.members(state, g):
            if slot["lost"] or (instance is None and slot.get("made")):
                continue  # gone, not made again (DO_NOTHING)
            vm: dict[str, Any] = {
                "instance": self.link(g.instance_path(slot)),
                "name": slot["name"],
            }
            if instance is None:
                vm["currentAction"] = "CREATING"
            else:
                vm["id"] = instance.uid
                vm["instanceStatus"] = instance.shown_status(self.now)
                deleting = instance.transition == "delete"
                vm["currentAction"] = (
                    "DELETING"
                    if deleting
                    else "CREATING"
                    if instance.transition == "create" or instance.status == "PENDING"
                    else "NONE"
                )
            if slot["error"]:
                vm["lastAttempt"] = {"errors": {"errors": [dict(slot["error"])]}}
            out.append(vm)
        return out

    def group(self, state: State, g: Group) -> dict[str, Any]:
        managed = self.managed(state, g)
        actions = Counter(m["currentAction"] for m in managed)
        statuses = Counter(
            _STATUS_KEYS.get(m.get("instanceStatus", ""), "nonExistent") for m in managed
        )
        current = {key: 0 for key in _ACTIONS}
        for action, count in actions.items():
            key = {"NONE": "none", "CREATING": "creating", "DELETING": "deleting"}[action]
            current[key] = count
        if not g.spawned and not g.deleting:  # currentActions.creating: VMs "scheduled to be
            # created" (cloud.google.com/compute/docs/reference/rest/v1/instanceGroupManagers)
            current["creating"] = g.target_size
        stable = g.spawned and actions.get("NONE", 0) == len(managed) and not g.deleting
        status: dict[str, Any] = {
            "isStable": stable,
            "versionTarget": {"isReached": True},
            "allInstancesConfig": {"effective": True},
            "stateful": {"hasStatefulConfig": False, "perInstanceConfigs": {"allEffective": True}},
            "currentInstanceStatuses": dict(statuses),
        }
        topology = group_api.topology_state(state, g)
        policy = state.compute.policies.get(g.policy)
        if topology is not None and policy is not None:
            status["appliedAcceleratorTopologies"] = [
                {"acceleratorTopology": policy.workload["acceleratorTopology"], "state": topology}
            ]
        template = self.link(g.template)
        out: dict[str, Any] = {
            "kind": "compute#instanceGroupManager",
            "id": g.uid,
            "creationTimestamp": timestamp(g.created),
            "name": g.name,
            "zone": self.link(f"projects/{g.project}/zones/{g.zone}"),
            "instanceTemplate": template,
            "versions": [
                {"instanceTemplate": template, "targetSize": {"calculated": g.target_size}}
            ],
            "instanceGroup": self.link(
                f"projects/{g.project}/zones/{g.zone}/instanceGroups/{g.name}"
            ),
            "baseInstanceName": g.base,
            "fingerprint": fingerprint([g.uid, g.target_size]),
            "currentActions": current,
            "status": status,
            "targetSize": g.target_size,
            "targetStoppedSize": 0,
            "targetSuspendedSize": 0,
            "listManagedInstancesResults": "PAGELESS",
            "selfLink": self.link(g.path),
            "updatePolicy": {
                "type": "OPPORTUNISTIC",
                "minimalAction": "REPLACE",
                "replacementMethod": "SUBSTITUTE",
                "instanceRedistributionType": "NONE",
            },
            "instanceLifecyclePolicy": {
                "defaultActionOnFailure": g.on_failure,
                "forceUpdateOnRepair": "NO",
            },
            "targetSizePolicy": {
                "mode": (g.body.get("targetSizePolicy") or {}).get("mode", "INDIVIDUAL")
            },
        }
        if g.policy:
            out["resourcePolicies"] = {"workloadPolicy": self.link(g.policy)}
        if g.body.get("description"):
            out["description"] = g.body["description"]
        if g.body.get("allInstancesConfig"):
            out["allInstancesConfig"] = g.body["allInstancesConfig"]
        return out

    def instance_group(self, state: State, g: Group) -> dict[str, Any]:
        """The unmanaged view of a group (`instanceGroups`), which gcloud reads for sizes."""
        size = sum(1 for _s, i in group_api.members(state, g) if i is not None)
        return {
            "kind": "compute#instanceGroup",
            "id": g.uid,
            "creationTimestamp": timestamp(g.created),
            "name": g.name,
            "description": "This instance group is controlled by Instance Group Manager "
            f"'{g.name}'. To modify instances in this group, use the Instance Group Manager API: "
            "https://cloud.google.com/compute/docs/reference/latest/instanceGroupManagers",
            "fingerprint": fingerprint([g.uid, size]),
            "zone": self.link(f"projects/{g.project}/zones/{g.zone}"),
            "size": size,
            "selfLink": self.link(f"projects/{g.project}/zones/{g.zone}/instanceGroups/{g.name}"),
        }
