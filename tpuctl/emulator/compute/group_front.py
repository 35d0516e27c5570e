"""The wire format of a slice's resources (workload policies, instance templates, managed
instance groups with `listManagedInstances`, region and global operations) and
`GroupFront`, the methods `urls.py` routes to. Field names and shapes: Compute Engine's
v1 REST reference (ResourcePolicy, InstanceTemplate, InstanceGroupManager with the TPU
fields `status.appliedAcceleratorTopologies` and `status.currentInstanceStatuses`,
ManagedInstance); see front.py for timestamps and links.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from tpuctl.emulator.compute import group_api, regional_api
from tpuctl.emulator.compute.front import ComputeFront, Renderer, _list, timestamp
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


def _scoped(key: str, scopes: list[str], found: dict[str, list[Any]]) -> dict:
    """An aggregated list's `items`: every scope, with its resources or the warning
    Compute gives an empty one."""
    items: dict[str, Any] = {}
    for scope in scopes:
        if found.get(scope):
            items[scope] = {key: found[scope]}
        else:
            items[scope] = {
                "warning": {
                    "code": "NO_RESULTS_ON_PAGE",
                    "message": f"There are no results for scope '{scope}' on this page.",
                    "data": [{"key": "scope", "value": scope}],
                }
            }
    return items


def _template_methods(fn: Any) -> tuple[Any, Any]:
    """A global template's method (`region` "") and a regional one's, for `fn`, an insert
    or a delete of regional_api (its last argument the body or the name)."""

    def global_(self: GroupFront, version: str, project: str, arg: Any, rid: str = "") -> dict:
        return self._change(version, rid, fn, project, "", arg)

    def regional(
        self: GroupFront, version: str, project: str, region: str, arg: Any, rid: str = ""
    ) -> dict:
        return self._change(version, rid, fn, project, region, arg)

    return global_, regional


class GroupFront(ComputeFront):
    """The REST methods of policies, templates, groups and region/global operations."""

    def _render(self, version: str, draw: Any) -> Any:
        """`draw(renderer, state)` under the lock, after the transitions due."""
        with self.backend.lock:
            r, state = self._run(version, lambda s: s)
            return draw(GroupRenderer(r.base, r.now), state)

    def _base(self, version: str) -> str:
        return f"http://{self.backend.endpoint}/compute/{version}/"

    # -- workload policies
    def insert_policy(
        self, version: str, project: str, region: str, body: dict, rid: str = ""
    ) -> dict:
        return self._change(version, rid, regional_api.insert_policy, project, region, body)

    def delete_policy(
        self, version: str, project: str, region: str, name: str, rid: str = ""
    ) -> dict:
        return self._change(version, rid, regional_api.delete_policy, project, region, name)

    def get_policy(self, version: str, project: str, region: str, name: str) -> dict:
        return self._render(
            version, lambda r, s: r.policy(regional_api.get_policy(s, project, region, name))
        )

    def list_policies(self, version: str, project: str, region: str, query: dict) -> dict:
        def draw(r: GroupRenderer, s: State) -> dict:
            regional_api.check_region(region)
            found, token = regional_api.paged(
                regional_api.policies(s, project, region),
                query.get("maxResults", ""),
                query.get("pageToken", ""),
            )
            return _list(
                "compute#resourcePolicyList",
                [r.policy(p) for p in found],
                token,
                r.link(f"projects/{project}/regions/{region}/resourcePolicies"),
            )

        return self._render(version, draw)

    def aggregated_policies(self, version: str, project: str, query: dict) -> dict:
        def draw(r: GroupRenderer, s: State) -> dict:
            found: dict[str, list[Any]] = {}
            for p in regional_api.policies(s, project, None):
                found.setdefault(f"regions/{p.region}", []).append(r.policy(p))
            scopes = [f"regions/{x}" for x in regional_api.regions()]
            out = _list(
                "compute#resourcePolicyAggregatedList",
                [],
                None,
                r.link(f"projects/{project}/aggregated/resourcePolicies"),
            )
            out["items"] = _scoped("resourcePolicies", scopes, found)
            return out

        return self._render(version, draw)

    # -- instance templates ("" region: global)
    insert_template, insert_region_template = _template_methods(regional_api.insert_template)
    delete_template, delete_region_template = _template_methods(regional_api.delete_template)

    def get_template(self, version: str, project: str, name: str, region: str = "") -> dict:
        return self._render(
            version, lambda r, s: r.template(regional_api.get_template(s, project, region, name))
        )

    def get_region_template(self, version: str, project: str, region: str, name: str) -> dict:
        return self.get_template(version, project, name, region)

    def list_templates(self, version: str, project: str, query: dict, region: str = "") -> dict:
        def draw(r: GroupRenderer, s: State) -> dict:
            if region:
                regional_api.check_region(region)
            found, token = regional_api.paged(
                regional_api.templates(s, project, region),
                query.get("maxResults", ""),
                query.get("pageToken", ""),
            )
            scope = f"regions/{region}" if region else "global"
            return _list(
                "compute#instanceTemplateList",
                [r.template(t) for t in found],
                token,
                r.link(f"projects/{project}/{scope}/instanceTemplates"),
            )

        return self._render(version, draw)

    def list_region_templates(self, version: str, project: str, region: str, query: dict) -> dict:
        return self.list_templates(version, project, query, region)

    def aggregated_templates(self, version: str, project: str, query: dict) -> dict:
        def draw(r: GroupRenderer, s: State) -> dict:
            found: dict[str, list[Any]] = {}
            for t in regional_api.templates(s, project, None):
                found.setdefault(f"regions/{t.region}" if t.region else "global", []).append(
                    r.template(t)
                )
            scopes = ["global"] + [f"regions/{x}" for x in regional_api.regions()]
            out = _list(
                "compute#instanceTemplateAggregatedList",
                [],
                None,
                r.link(f"projects/{project}/aggregated/instanceTemplates"),
            )
            out["items"] = _scoped("instanceTemplates", scopes, found)
            return out

        return self._render(version, draw)

    # -- managed instance groups
    def insert_group(
        self, version: str, project: str, zone: str, body: dict, rid: str = ""
    ) -> dict:
        return self._change(version, rid, group_api.insert_group, project, zone, body)

    def delete_group(self, version: str, project: str, zone: str, name: str, rid: str = "") -> dict:
        return self._change(version, rid, group_api.delete_group, project, zone, name)

    def get_group(self, version: str, project: str, zone: str, name: str) -> dict:
        return self._render(
            version, lambda r, s: r.group(s, group_api.get_group(s, project, zone, name))
        )

    def list_managed(self, version: str, project: str, zone: str, name: str) -> dict:
        return self._render(
            version,
            lambda r, s: {
                "managedInstances": r.managed(s, group_api.get_group(s, project, zone, name))
            },
        )

    def list_groups(self, version: str, project: str, zone: str, query: dict) -> dict:
        def draw(r: GroupRenderer, s: State) -> dict:
            found, token = regional_api.paged(
                group_api.groups(s, project, zone),
                query.get("maxResults", ""),
                query.get("pageToken", ""),
            )
            return _list(
                "compute#instanceGroupManagerList",
                [r.group(s, g) for g in found],
                token,
                r.link(f"projects/{project}/zones/{zone}/instanceGroupManagers"),
            )

        from tpuctl.emulator.compute import rules

        rules.check_zone(zone, project)
        return self._render(version, draw)

    def aggregated_groups(self, version: str, project: str, query: dict) -> dict:
        from tpuctl.emulator.compute import catalog

        def draw(r: GroupRenderer, s: State) -> dict:
            found: dict[str, list[Any]] = {}
            for g in group_api.groups(s, project, None):
                found.setdefault(f"zones/{g.zone}", []).append(r.group(s, g))
            scopes = [f"zones/{z}" for z in catalog.zones()]
            out = _list(
                "compute#instanceGroupManagerAggregatedList",
                [],
                None,
                r.link(f"projects/{project}/aggregated/instanceGroupManagers"),
            )
            out["items"] = _scoped("instanceGroupManagers", scopes, found)
            return out

        return self._render(version, draw)

    def list_instance_groups(self, version: str, project: str, zone: str, query: dict) -> dict:
        from tpuctl.emulator.compute import rules

        def draw(r: GroupRenderer, s: State) -> dict:
            rules.check_zone(zone, project)
            found, token = regional_api.paged(
                group_api.groups(s, project, zone),
                query.get("maxResults", ""),
                query.get("pageToken", ""),
            )
            items = [r.instance_group(s, g) for g in found]
            link = r.link(f"projects/{project}/zones/{zone}/instanceGroups")
            return _list("compute#instanceGroupList", items, token, link)

        return self._render(version, draw)

    def get_instance_group(self, version: str, project: str, zone: str, name: str) -> dict:
        return self._render(
            version, lambda r, s: r.instance_group(s, group_api.get_group(s, project, zone, name))
        )

    # -- autoscalers: none here (gcloud asks before it shows or lists a group)
    def list_autoscalers(self, version: str, project: str, zone: str, query: dict) -> dict:
        from tpuctl.emulator.compute import rules

        rules.check_zone(zone, project)
        link = f"{self._base(version)}projects/{project}/zones/{zone}/autoscalers"
        return _list("compute#autoscalerList", [], None, link)

    def aggregated_autoscalers(self, version: str, project: str, query: dict) -> dict:
        from tpuctl.emulator.compute import catalog

        link = f"{self._base(version)}projects/{project}/aggregated/autoscalers"
        out = _list("compute#autoscalerAggregatedList", [], None, link)
        out["items"] = _scoped("autoscalers", [f"zones/{z}" for z in catalog.zones()], {})
        return out

    # -- region and global operations
    def get_region_operation(self, version: str, project: str, region: str, name: str) -> dict:
        return self._op(version, regional_api.get_operation, project, "regions", region, name)

    def get_global_operation(self, version: str, project: str, name: str) -> dict:
        return self._op(version, regional_api.get_operation, project, "global", "", name)

    # a region's or global operation is DONE when answered: `wait` is `get`
    wait_region_operation = get_region_operation
    wait_global_operation = get_global_operation
