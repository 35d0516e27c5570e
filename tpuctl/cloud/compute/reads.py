"""What ComputeTpuApi reads of Compute Engine: a node (an instance, or a slice's group
and VMs), the nodes of a zone or project, what unfinished creates left, the VMs' guest
attributes, and what a zone offers. `api.py` adds what changes them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tpuctl import catalog
from tpuctl.cloud.compute import leftovers as compute_orphans
from tpuctl.cloud.compute import slice_state
from tpuctl.cloud.compute import slices as compute_slice
from tpuctl.cloud.compute import wire as compute_wire
from tpuctl.errors import NotFoundError, UsageError
from tpuctl.leftover import Leftover
from tpuctl.models import Node

PREEMPTED_OP = "compute.instances.preempted"  # the system operation of a preemption
# what a VM being deleted shows until it is gone (as tpuctl's states name them: wire.STATES)
STOPPING = ("STOPPING", "STOPPED")


def parts(name: str) -> tuple[str, str, str]:
    """`projects/P/locations/Z/nodes/N` (or `.../operations/OP`) -> (P, Z, last part)."""
    parts = name.split("/")
    return parts[1], parts[3], parts[-1]


class ComputeReads:
    """The REST session, its calls, and every read of TPU VMs on Compute Engine."""

    def __init__(
        self,
        session: Callable[[], Any],
        endpoint: str,
        where: str = "Compute Engine",
        hint: str = "",
    ) -> None:
        self._session = session
        self._endpoint = endpoint.rstrip("/")  # .../compute/v1
        self._where, self._hint = where, hint
        # The single-host VMs this adapter asked to delete. Compute Engine shows a VM being
        # deleted as STOPPING (then TERMINATED) until it is gone, as a VM being stopped: no
        # field of the instance tells the two apart, so the one that asked says DELETING.
        self._deleting: set[tuple[str, str, str]] = set()

    def _node(self, data: dict[str, Any], project: str) -> Node:
        """A single-host VM as a node; DELETING once this adapter asked to delete it."""
        node = compute_wire.node_from_instance(data, project)
        if (project, node.zone, node.name) in self._deleting and node.state in STOPPING:
            node.state = "DELETING"
        return node

    def _call(self, method: str, path: str, subject: str, project: str, **kw: Any) -> Any:
        from tpuctl.cloud import rest

        return rest.call(
            self._session,
            method,
            f"{self._endpoint}/{path}",
            subject=subject,
            where=self._where,
            hint=self._hint,
            project=project,
            **kw,
        )

    def _instance(self, name: str) -> tuple[str, str, str, str]:
        project, zone, node = parts(name)
        return project, zone, node, f"projects/{project}/zones/{zone}/instances/{node}"

    # -- nodes --------------------------------------------------------------
    def get_node(self, name: str) -> Node:
        project, zone, node, path = self._instance(name)
        try:
            data = self._call("GET", path, f"instance '{node}' in zone {zone}", project)
        except NotFoundError as e:
            return self._slice(project, zone, node, e)
        group = slice_state.group_of(data)
        if group is not None:
            number = slice_state.worker_number(data)
            raise UsageError(
                f"instance {node} is worker {number} of the slice {group}, not a node of its own",
                hint=f"name the slice: {group}",
            )
        return self._node(data, project)

    def _slice(self, project: str, zone: str, name: str, missing: NotFoundError) -> Node:
        """The multi-host slice `name` (its MIG and VMs), or what a create or delete that did
        not finish left of it; `missing` when tpuctl has nothing of that name there."""
        mig, template, policy = compute_slice.paths(project, zone, name)
        group = self._ours(mig, "managed instance group", name, zone, project)
        if group is None:
            parts = [
                self._ours(template, "instance template", name, zone, project),
                self._ours(policy, "workload policy", name, zone, project),
            ]
            if parts == [None, None]:
                raise missing
            return slice_state.leftovers(project, zone, name, *parts)
        managed = self._managed(mig, project)
        return slice_state.node(group, managed, self._members(project, zone, name), project)

    def _ours(self, path: str, what: str, name: str, zone: str, project: str) -> dict | None:
        try:
            found = self._call("GET", path, f"{what} {path.rsplit('/', 1)[-1]}", project)
        except NotFoundError:
            return None
        return found if compute_slice.ours(found, what, name, zone) else None

    def _managed(self, mig: str, project: str) -> list[dict[str, Any]]:
        page = self._call(
            "POST",
            f"{mig}/listManagedInstances",
            f"managed instance group {mig.rsplit('/', 1)[-1]}",
            project,
        )
        return list(page.get("managedInstances") or [])

    def _members(self, project: str, zone: str, name: str) -> list[dict[str, Any]]:
        """The VMs the MIG `name` made, from one filtered list of the zone."""
        path = f"projects/{project}/zones/{zone}/instances"
        found: list[dict[str, Any]] = []
        for page in self._pages(
            path, f"instances in zone {zone}", project, {"filter": f'name eq "{name}-.*"'}
        ):
            found += page.get("items") or []
        return [i for i in found if slice_state.group_of(i) == name]

    def gone_state(self, name: str) -> str:
        """PREEMPTED when the zone's operations hold a `compute.instances.preempted` of
        the VM: a spot VM whose termination action is DELETE is gone at its preemption,
        and that system operation is how Compute Engine tells it ("Detect preemption of
        Spot VMs", https://cloud.google.com/compute/docs/instances/create-use-spot:
        `gcloud compute operations list --filter="operationType=compute.instances.
        preempted"`); DELETED otherwise, or when the operations cannot be read."""
        from tpuctl.errors import TpuctlError

        project, zone, node, path = self._instance(name)
        query = {"filter": f'operationType="{PREEMPTED_OP}"'}
        try:
            pages = self._pages(
                f"projects/{project}/zones/{zone}/operations",
                f"operations of {zone}",
                project,
                query,
            )
        except TpuctlError:
            return "DELETED"
        ops = [op for page in pages for op in page.get("items") or []]
        hit = any(str(op.get("targetLink", "")).endswith(f"/{path}") for op in ops)
        return "PREEMPTED" if hit else "DELETED"

    def _pages(
        self, path: str, subject: str, project: str, params: dict[str, str] | None = None
    ) -> list[dict[str, Any]]:
        """Every page of a list call, followed through its nextPageToken."""
        pages, token = [], ""
        while True:
            asked = {**(params or {}), **({"pageToken": token} if token else {})}
            page = self._call("GET", path, subject, project, params=asked)
            pages.append(page)
            token = page.get("nextPageToken") or ""
            if not token:
                return pages

    def list_nodes(self, parent: str) -> list[Node]:
        """The TPU VMs: single-host instances, and each slice (its MIG) as one node. The
        instances and the groups are listed concurrently."""
        from tpuctl.concurrency import each

        project, zone = parent.split("/")[1], parent.split("/")[3]
        scope = (
            f"projects/{project}/aggregated" if zone == "-" else f"projects/{project}/zones/{zone}"
        )
        where = f"project {project}" if zone == "-" else f"zone {zone}"

        def read(kind: str) -> list[dict[str, Any]]:
            found: list[dict[str, Any]] = []
            for page in self._pages(f"{scope}/{kind}", f"{kind} of {where}", project):
                items = page.get("items") or []
                if isinstance(items, dict):  # aggregated: by scope
                    for scoped in items.values():
                        found += scoped.get(kind) or []
                else:
                    found += items
            return found

        instances, groups = each(read, ["instances", "instanceGroupManagers"], 2)
        members: dict[tuple[str, str], list[dict[str, Any]]] = {}
        nodes = []
        for data in instances:
            group = slice_state.group_of(data)
            if group is None:
                nodes.append(self._node(data, project))
            else:
                key = (str(data.get("zone", "")).rsplit("/", 1)[-1], group)
                members.setdefault(key, []).append(data)
        nodes = [n for n in nodes if n.slice.known]  # TPU VMs only, not every VM
        for mig in groups:
            gzone = str(mig.get("zone", "")).rsplit("/", 1)[-1]
            name = str(mig.get("name", ""))
            if compute_slice.ours(mig, "managed instance group", name, gzone):
                vms = members.get((gzone, name), [])
                nodes.append(slice_state.node(mig, None, vms, project))
        return sorted(nodes, key=lambda n: (n.zone, n.name))

    def leftovers(self, parent: str) -> list[Leftover]:
        """What creates or deletes that did not finish left of slices: a template or policy
        with no group, a group with no VM (`leftovers.py`). `delete_node` of a
        leftover's `full_name` deletes it."""
        project, zone = parent.split("/")[1], parent.split("/")[3]
        return compute_orphans.find(
            lambda path, subject: self._pages(path, subject, project),
            project,
            None if zone == "-" else zone,
        )

    def _vms(self, name: str) -> list[dict[str, Any]]:
        """The node's VMs in worker order: the instance, or the slice's MIG's VMs."""
        project, zone, node, path = self._instance(name)
        try:
            return [self._call("GET", path, f"instance '{node}' in zone {zone}", project)]
        except NotFoundError as e:
            vms = slice_state.in_order(self._members(project, zone, node))
            if not vms:
                raise e
            return vms

    def get_guest_attributes(self, name: str, query_path: str = "") -> list[dict[str, str]]:
        """Per VM, in worker order; {} for a VM that has published nothing yet."""
        project = parts(name)[0]
        out: list[dict[str, str]] = []
        for vm in self._vms(name):
            path = str(vm.get("selfLink", "")).split("/compute/", 1)[-1].split("/", 1)[-1]
            try:
                data = self._call(
                    "GET",
                    f"{path}/getGuestAttributes",
                    f"instance '{vm.get('name')}'",
                    project,
                    params={"queryPath": query_path},
                )
            except NotFoundError:
                out.append({})  # nothing published yet
                continue
            items = (data.get("queryValue") or {}).get("items") or []
            out.append(
                {f"{i.get('namespace', '')}/{i.get('key', '')}": i.get("value", "") for i in items}
            )
        return out

    # -- what a zone offers ------------------------------------------------------
    def accelerator_types(self, parent: str) -> list[str]:
        project, zone = parent.split("/")[1], parent.split("/")[3]
        page = self._call(
            "GET", f"projects/{project}/zones/{zone}/machineTypes", f"zone {zone}", project
        )
        offered = {str(m.get("name", "")) for m in page.get("items") or []}
        return [s.name for s in catalog.SHAPES.values() if s.machine_type in offered]

    def runtime_versions(self, parent: str) -> list[str]:
        return sorted(set(compute_wire.IMAGE_FAMILIES.values()))
