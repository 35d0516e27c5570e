"""`GroupFront`, the methods `urls.py` routes to for a slice's resources (workload
policies, instance templates, managed instance groups, region and global operations),
drawn in their wire format by `group_wire.GroupRenderer`.
"""

from __future__ import annotations

from typing import Any

from tpuctl.emulator.compute import group_api, regional_api
from tpuctl.emulator.compute.front import ComputeFront, _list
from tpuctl.emulator.compute.group_wire import GroupRenderer
from tpuctl.emulator.core.state import State


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
