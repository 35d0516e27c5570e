"""What a create or a delete that did not finish left of a multi-host slice on Compute
Engine: a workload policy or an instance template with no managed instance group (a
create killed between the policy and the group), or a group with no VM left.

Compute Engine has labels on instances only, so these are found by what tpuctl gave them
(`cloud/compute_slice.py`): a name made from the slice's name and its zone's letter
(`NAME-<letter>-wp`, `NAME-<letter>-it`, the group's own `NAME`) and the description
`MARKER` naming the same slice and zone, in the region (or zone) the description says.
A resource that lacks any of these is nobody's business here, whatever it looks like.
A leftover's owner is the one its template's labels say, or where its template is gone
the one its policy's description names (`OWNED`; none in an older tpuctl's).

Each leftover is deleted as `ComputeTpuApi.delete_node` deletes a slice: the group, then
the template, then the policy, each read again and checked for its description first.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tpuctl.cloud.compute import slice_state
from tpuctl.cloud.compute import slices as compute_slice
from tpuctl.leftover import Leftover, Part
from tpuctl.models import MANAGED_BY, MANAGED_BY_VALUE, OWNER

GROUP, TEMPLATE, POLICY = "managed instance group", "instance template", "workload policy"
KINDS = {GROUP: "instanceGroupManagers", TEMPLATE: "instanceTemplates", POLICY: "resourcePolicies"}
_MARK = re.compile(
    r"tpuctl: (?P<what>managed instance group|instance template|workload policy) of TPU "
    r"slice (?P<name>[a-z](?:[-a-z0-9]*[a-z0-9])?) in (?P<zone>[a-z]+-[a-z]+[0-9]+-[a-z0-9]+)"
    r"(?:, owned by .*)?"  # a policy's owner: `slices.ours` reads it
)
Pages = Callable[[str, str], list[dict[str, Any]]]  # (path, subject) -> every page of a list


def claim(resource: dict[str, Any], what: str) -> tuple[str, str] | None:
    """(slice name, zone) when `resource` is tpuctl's `what` of that slice: its description
    is tpuctl's, and its name and scope are those tpuctl gives it for that slice."""
    m = _MARK.fullmatch(str(resource.get("description", "")))
    if m is None or m["what"] != what:
        return None
    name, zone = m["name"], m["zone"]
    policy, template = compute_slice.names(name, zone)
    expected = {GROUP: name, TEMPLATE: template, POLICY: policy}[what]
    scope = str(resource.get("zone" if what == GROUP else "region", "")).rsplit("/", 1)[-1]
    wanted = zone if what == GROUP else compute_slice.region(zone)
    if resource.get("name") != expected or scope != wanted:
        return None
    return (name, zone) if compute_slice.ours(resource, what, name, zone) else None


def find(pages: Pages, project: str, zone: str | None = None) -> list[Leftover]:
    """Every leftover of the project (of one zone, if given): four aggregated lists, read
    concurrently."""
    from tpuctl.concurrency import each

    def read(kind: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for page in pages(f"projects/{project}/aggregated/{kind}", f"{kind} of project {project}"):
            for scoped in (page.get("items") or {}).values():  # by scope: zones/Z, regions/R
                found += scoped.get(kind) or []
        return found

    groups, templates, policies, instances = each(
        read, [KINDS[GROUP], KINDS[TEMPLATE], KINDS[POLICY], "instances"], 4
    )
    found: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for what, items in ((GROUP, groups), (TEMPLATE, templates), (POLICY, policies)):
        for item in items:
            key = claim(item, what)
            if key is not None and (zone is None or key[1] == zone):
                found.setdefault((key[1], key[0]), {})[what] = item
    members: set[tuple[str, str]] = set()
    for vm in instances:
        owner = slice_state.group_of(vm)
        if owner is not None:
            members.add((str(vm.get("zone", "")).rsplit("/", 1)[-1], owner))
    out = []
    for (where, name), parts in sorted(found.items()):
        group = parts.get(GROUP)
        if group is not None:
            creating = int((group.get("currentActions") or {}).get("creating") or 0)
            if (where, name) in members or creating:
                continue  # a slice, or one coming up: a node, not a leftover
            why = "its managed instance group has no VM left"
        else:
            why = "left without its managed instance group (a create or delete that did not finish)"
        template = parts.get(TEMPLATE) or {}
        labels = dict((template.get("properties") or {}).get("labels") or {})
        owner = compute_slice.policy_owner(parts.get(POLICY) or {})
        if not template and owner:  # what the template would say: tpuctl's, and whose
            labels = {MANAGED_BY: MANAGED_BY_VALUE, OWNER: owner}
        listed = [
            Part(what, str(parts[what].get("name")), _created(parts[what]))
            for what in (GROUP, TEMPLATE, POLICY)
            if what in parts
        ]
        out.append(Leftover(project, where, name, listed, why, labels))
    return out


def _created(resource: dict[str, Any]) -> float | None:
    from tpuctl.timestamps import parse_rfc3339

    text = resource.get("creationTimestamp")
    return parse_rfc3339(str(text)).timestamp() if text else None
