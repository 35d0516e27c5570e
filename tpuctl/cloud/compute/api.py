"""ComputeTpuApi: TPU VMs on Compute Engine behind the backend protocol (`cloud/backend.py`).

A single-host TPU VM is one VM instance (TPU7x, v6e and v5p machine types); a multi-host
slice is a workload policy, an instance template and a managed instance group
(`slices.py`), read and deleted as one node. REST through google-auth's authorised
session (`cloud/rest.py`): google-cloud-compute costs 1.7 s to import and its operations
poll Google's endpoint whatever the client's is. Services name a node as on the TPU API,
`projects/P/locations/ZONE/nodes/NAME`; here that is the instance NAME in ZONE.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from tpuctl import catalog
from tpuctl.catalog.shapes import SliceShape
from tpuctl.cloud.compute import leftovers as compute_orphans
from tpuctl.cloud.compute import slices as compute_slice
from tpuctl.cloud.compute import wire as compute_wire
from tpuctl.cloud.compute.rules import ComputeRules
from tpuctl.errors import (
    AlreadyExistsError,
    CloudError,
    NotFoundError,
    PreconditionFailedError,
    TpuctlError,
    UsageError,
)
from tpuctl.models import CreateSpec, Leftover, Node, OperationStatus

MAX_RUN_SECONDS = 120 * 86400  # scheduling.maxRunDuration's limit
SLICE_OP = "~slice~"  # an operation name's tail: the create of a slice, waited until its VMs run


def _parts(name: str) -> tuple[str, str, str]:
    """`projects/P/locations/Z/nodes/N` (or `.../operations/OP`) -> (P, Z, last part)."""
    parts = name.split("/")
    return parts[1], parts[3], parts[-1]


class ComputeTpuApi(ComputeRules):
    """TPU VMs and slices on Compute Engine, as tpuctl's services use a TPU API."""

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
        project, zone, node = _parts(name)
        return project, zone, node, f"projects/{project}/zones/{zone}/instances/{node}"

    # -- nodes --------------------------------------------------------------
    def get_node(self, name: str) -> Node:
        project, zone, node, path = self._instance(name)
        try:
            data = self._call("GET", path, f"instance '{node}' in zone {zone}", project)
        except NotFoundError as e:
            return self._slice(project, zone, node, e)
        group = compute_slice.group_of(data)
        if group is not None:
            number = compute_slice.worker_number(data)
            raise UsageError(
                f"instance {node} is worker {number} of the slice {group}, not a node of its own",
                hint=f"name the slice: {group}",
            )
        return compute_wire.node_from_instance(data, project)

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
            return compute_slice.leftovers(project, zone, name, *parts)
        managed = self._managed(mig, project)
        return compute_slice.node(group, managed, self._members(project, zone, name), project)

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
        return [i for i in found if compute_slice.group_of(i) == name]

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
            group = compute_slice.group_of(data)
            if group is None:
                nodes.append(compute_wire.node_from_instance(data, project))
            else:
                key = (str(data.get("zone", "")).rsplit("/", 1)[-1], group)
                members.setdefault(key, []).append(data)
        nodes = [n for n in nodes if n.slice.known]  # TPU VMs only, not every VM
        for mig in groups:
            gzone = str(mig.get("zone", "")).rsplit("/", 1)[-1]
            name = str(mig.get("name", ""))
            if compute_slice.ours(mig, "managed instance group", name, gzone):
                vms = members.get((gzone, name), [])
                nodes.append(compute_slice.node(mig, None, vms, project))
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

    def create_node(self, parent: str, spec: CreateSpec) -> str | None:
        project, zone = parent.split("/")[1], parent.split("/")[3]
        if spec.ttl is not None and not 30 <= spec.ttl <= MAX_RUN_SECONDS:
            raise UsageError(
                f"--ttl of {spec.ttl} s is outside what Compute Engine enforces on a VM "
                "(its maxRunDuration: 30 s to 120 days)",
                hint="a TTL from 30s to 120d (e.g. --ttl 8h)",
            )
        if spec.shape.multi_host:
            made = compute_slice.create(self._call, self._wait, project, spec, zone)
            if not made:  # its group adopted: made by this create's lost first attempt
                return None
            op_name = f"{made['name']}{SLICE_OP}{spec.name}"
            return f"projects/{project}/locations/{zone}/operations/{op_name}"
        subject, instances = (
            f"instance '{spec.name}' in zone {zone}",
            f"projects/{project}/zones/{zone}/instances",
        )
        body = compute_wire.instance_body(spec, zone)
        try:
            op = self._call(
                "POST", instances, subject, project, json=body, params=compute_wire.once()
            )
        except AlreadyExistsError:  # made by this create's lost first attempt: adopted
            if compute_wire.made_by(
                self._call("GET", f"{instances}/{spec.name}", subject, project), spec
            ):
                return None
            raise
        return f"projects/{project}/locations/{zone}/operations/{op['name']}"

    def _action(self, name: str, verb: str) -> str | None:
        project, zone, node, path = self._instance(name)
        subject = f"instance '{node}' in zone {zone}"
        once = compute_wire.once()
        if verb == "delete":
            op = self._call("DELETE", path, subject, project, params=once)
        else:
            try:
                op = self._call("POST", f"{path}/{verb}", subject, project, params=once)
            except NotFoundError as e:
                if self._slice(project, zone, node, e):
                    raise UsageError(
                        f"{node} is a multi-host slice on Compute Engine, which cannot be "
                        f"{verb}ped: its managed instance group would not keep the slice whole",
                        hint=f"delete it (`tpuctl delete {node}`) and create it again",
                    ) from None
                raise
        return f"projects/{project}/locations/{zone}/operations/{op['name']}"

    def delete_node(self, name: str) -> str | None:
        """A single-host instance: its delete's operation. A slice: its MIG (with its VMs),
        then its template, then its policy, each waited for (a template or policy still
        in use cannot be deleted); None, as it is gone when this returns."""
        project, zone, node, _path = self._instance(name)
        try:
            return self._action(name, "delete")
        except NotFoundError as e:
            missing = e
        mig, template, policy = compute_slice.paths(project, zone, node)
        gone = True
        for path, what in (
            (mig, "managed instance group"),
            (template, "instance template"),
            (policy, "workload policy"),
        ):
            if self._ours(path, what, node, zone, project) is None:
                continue
            gone = False
            with contextlib.suppress(NotFoundError):  # gone meanwhile
                subject = f"{what} {path.rsplit('/', 1)[-1]}"
                op = self._call("DELETE", path, subject, project, params=compute_wire.once())
                self._wait(op, f"the delete of {subject}")
        if gone:
            raise missing
        return None

    def _wait(self, op: dict[str, Any], subject: str, timeout: float = 1800.0) -> None:
        """Wait for a zone, region or global operation to be DONE (Compute's `wait`, which
        answers within about 2 minutes, DONE or not); raise its error."""
        import time

        path = str(op.get("selfLink", "")).split("/compute/", 1)[-1].split("/", 1)[-1]
        project = path.split("/")[1] if path.startswith("projects/") else ""
        deadline = time.monotonic() + timeout
        while op.get("status") != "DONE":
            if time.monotonic() > deadline:
                raise CloudError(f"{subject} did not finish in {timeout:.0f} s")
            op = self._call("POST", f"{path}/wait", subject, project)
        error = compute_wire.operation_error(op, subject)
        if error is not None:
            raise error

    def stop_node(self, name: str) -> str | None:
        return self._action(name, "stop")

    def start_node(self, name: str) -> str | None:
        return self._action(name, "start")

    def set_labels(self, name: str, labels: dict[str, str]) -> str:
        project, zone, node, path = self._instance(name)
        subject = f"instance '{node}' in zone {zone}"
        current = self._call("GET", path, subject, project)
        op = self._call(
            "POST",
            f"{path}/setLabels",
            subject,
            project,
            json={
                "labels": labels,
                "labelFingerprint": current.get("labelFingerprint", ""),
            },
            params=compute_wire.once(),
        )
        return f"projects/{project}/locations/{zone}/operations/{op['name']}"

    def _vms(self, name: str) -> list[dict[str, Any]]:
        """The node's VMs in worker order: the instance, or the slice's MIG's VMs."""
        project, zone, node, path = self._instance(name)
        try:
            return [self._call("GET", path, f"instance '{node}' in zone {zone}", project)]
        except NotFoundError as e:
            vms = compute_slice.in_order(self._members(project, zone, node))
            if not vms:
                raise e
            return vms

    def patch_metadata(
        self, name: str, change: Callable[[dict[str, str]], dict[str, str] | None]
    ) -> Node:
        """Read-modify-write each VM's metadata (`setMetadata`, guarded by its fingerprint:
        a change made meanwhile is read again, not overwritten)."""
        project = _parts(name)[0]
        for vm in self._vms(name):
            path = str(vm.get("selfLink", "")).split("/compute/", 1)[-1].split("/", 1)[-1]
            subject = f"instance '{vm.get('name')}'"
            for _attempt in range(5):
                md = vm.get("metadata") or {}
                items = {str(i.get("key")): str(i.get("value", "")) for i in md.get("items") or []}
                wanted = change(items)
                if wanted is None:
                    break
                body = {
                    "fingerprint": md.get("fingerprint", ""),
                    "items": [{"key": k, "value": v} for k, v in wanted.items()],
                }
                try:
                    self._wait(
                        self._call(
                            "POST",
                            f"{path}/setMetadata",
                            subject,
                            project,
                            json=body,
                            params=compute_wire.once(),
                        ),
                        f"the metadata of {subject}",
                    )
                    break
                except PreconditionFailedError:
                    vm = self._call("GET", path, subject, project)  # changed meanwhile
            else:
                raise CloudError(f"the metadata of {subject} kept changing; try again")
        return self.get_node(name)

    def get_guest_attributes(self, name: str, query_path: str = "") -> list[dict[str, str]]:
        """Per VM, in worker order; {} for a VM that has published nothing yet."""
        project = _parts(name)[0]
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

    def operation_status(self, name: str, subject: str) -> OperationStatus:
        project, zone, op_name = _parts(name)
        if SLICE_OP in op_name:
            mig_op, slice_name = op_name.split(SLICE_OP)
            return self._slice_status(project, zone, mig_op, slice_name, subject)
        op = self._call(
            "GET",
            f"projects/{project}/zones/{zone}/operations/{op_name}",
            f"operation {op_name}",
            project,
        )
        return OperationStatus(
            op.get("status") == "DONE", compute_wire.operation_error(op, subject)
        )

    def _slice_status(
        self, project: str, zone: str, op_name: str, name: str, subject: str
    ) -> OperationStatus:
        """A slice's create: done once the MIG exists and all its VMs run; the first VM
        the group could not make (no capacity, no quota) fails it."""
        op = self._call(
            "GET",
            f"projects/{project}/zones/{zone}/operations/{op_name}",
            f"operation {op_name}",
            project,
        )
        error = compute_wire.operation_error(op, subject)
        if op.get("status") != "DONE" or error is not None:
            return OperationStatus(op.get("status") == "DONE", error)
        mig = compute_slice.paths(project, zone, name)[0]
        managed = self._managed(mig, project)
        error = compute_slice.capacity_error(managed, subject)
        group = self._call("GET", mig, f"managed instance group {name}", project)
        running = [m for m in managed if m.get("instanceStatus") == "RUNNING"]
        whole = len(running) == group.get("targetSize")
        if error is None and not running and compute_slice.waits_in_bulk(group):
            error = self.wait_ended(project, zone, group, subject)
        return OperationStatus(error is not None or whole, error)

    def wait_ended(
        self, project: str, zone: str, group: dict[str, Any], subject: str
    ) -> TpuctlError | None:
        """No capacity, once the flex-start slice `group` has waited for it as long as its
        template allows (`compute_slice.WAIT_FOR`); None before, or with no such wait."""
        template = compute_slice.paths(project, zone, str(group.get("name", "")))[1]
        try:
            found = self._call(
                "GET", template, f"instance template of {group.get('name')}", project
            )
        except NotFoundError:
            return None
        return compute_slice.wait_ended(group, found, subject)

    def whole_at_once(self, shape: SliceShape) -> bool:
        """A single-host instance becomes the node on its own; a slice's three resources
        are no node until all its VMs run (an unfinished create is undone)."""
        return not shape.multi_host

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
