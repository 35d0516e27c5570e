"""ComputeTpuApi: TPU VMs on Compute Engine behind the backend protocol (`cloud/backend.py`).

This first slice manages single-host TPU VMs, one VM instance each (TPU7x, v6e and v5p
machine types); multi-host slices (a workload policy, an instance template and a managed
instance group) are refused as not yet supported. REST through google-auth's authorised
session (`cloud/rest.py`): google-cloud-compute costs 1.7 s to import and its operations
poll Google's endpoint whatever the client's is. Services name a node as on the TPU API,
`projects/P/locations/ZONE/nodes/NAME`; here that is the instance NAME in ZONE.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tpuctl.cloud import compute_wire
from tpuctl.errors import CloudError, NotFoundError, UsageError
from tpuctl.models import CreateSpec, Node, OperationStatus, QueuedResource, QueueSpec


def _parts(name: str) -> tuple[str, str, str]:
    """`projects/P/locations/Z/nodes/N` (or `.../operations/OP`) -> (P, Z, last part)."""
    parts = name.split("/")
    return parts[1], parts[3], parts[-1]


class ComputeTpuApi:
    """Single-host TPU VMs on Compute Engine, as tpuctl's services use a TPU API."""

    api = "compute"

    def __init__(
        self, session: Callable[[], Any], endpoint: str, where: str = "Compute Engine",
        hint: str = "",
    ) -> None:  # fmt: skip
        self._session = session
        self._endpoint = endpoint.rstrip("/")  # .../compute/v1
        self._where, self._hint = where, hint

    def _call(self, method: str, path: str, subject: str, project: str, **kw: Any) -> Any:
        from tpuctl.cloud import rest

        return rest.call(
            self._session, method, f"{self._endpoint}/{path}", subject=subject,
            where=self._where, hint=self._hint, project=project, **kw,
        )  # fmt: skip

    def _instance(self, name: str) -> tuple[str, str, str, str]:
        project, zone, node = _parts(name)
        return project, zone, node, f"projects/{project}/zones/{zone}/instances/{node}"

    # -- nodes --------------------------------------------------------------
    def get_node(self, name: str) -> Node:
        project, zone, node, path = self._instance(name)
        data = self._call("GET", path, f"instance '{node}' in zone {zone}", project)
        return compute_wire.node_from_instance(data, project)

    def _pages(self, path: str, subject: str, project: str) -> list[dict[str, Any]]:
        """Every page of a list call, followed through its nextPageToken."""
        pages, token = [], ""
        while True:
            page = self._call("GET", path, subject, project,
                              params={"pageToken": token} if token else {})  # fmt: skip
            pages.append(page)
            token = page.get("nextPageToken") or ""
            if not token:
                return pages

    def list_nodes(self, parent: str) -> list[Node]:
        project, zone = parent.split("/")[1], parent.split("/")[3]
        found: list[dict[str, Any]] = []
        if zone == "-":
            path = f"projects/{project}/aggregated/instances"
            for page in self._pages(path, f"instances of project {project}", project):
                for scoped in (page.get("items") or {}).values():
                    found += scoped.get("instances") or []
        else:
            path = f"projects/{project}/zones/{zone}/instances"
            for page in self._pages(path, f"instances in zone {zone}", project):
                found += page.get("items") or []
        nodes = [compute_wire.node_from_instance(d, project) for d in found]
        return [n for n in nodes if n.slice.known]  # TPU VMs only, not every VM

    def create_node(self, parent: str, spec: CreateSpec) -> str | None:
        project, zone = parent.split("/")[1], parent.split("/")[3]
        if spec.shape.multi_host:
            raise UsageError(
                f"{spec.shape.name} has {spec.shape.hosts} hosts: multi-host slices on Compute "
                "Engine are not supported by this version of tpuctl",
                hint="a single-host type (e.g. tpu7x-8, v6e-8, v5p-8), or --api tpu for v6e/v5p",
            )
        op = self._call(
            "POST", f"projects/{project}/zones/{zone}/instances",
            f"instance '{spec.name}' in zone {zone}", project,
            json=compute_wire.instance_body(spec, zone),
        )  # fmt: skip
        return f"projects/{project}/locations/{zone}/operations/{op['name']}"

    def _action(self, name: str, verb: str) -> str | None:
        project, zone, node, path = self._instance(name)
        subject = f"instance '{node}' in zone {zone}"
        try:
            if verb == "delete":
                op = self._call("DELETE", path, subject, project)
            else:
                op = self._call("POST", f"{path}/{verb}", subject, project)
        except NotFoundError:
            if verb == "delete":
                return None  # gone already
            raise
        return f"projects/{project}/locations/{zone}/operations/{op['name']}"

    def delete_node(self, name: str) -> str | None:
        return self._action(name, "delete")

    def stop_node(self, name: str) -> str | None:
        return self._action(name, "stop")

    def start_node(self, name: str) -> str | None:
        return self._action(name, "start")

    def set_labels(self, name: str, labels: dict[str, str]) -> str:
        project, zone, node, path = self._instance(name)
        subject = f"instance '{node}' in zone {zone}"
        current = self._call("GET", path, subject, project)
        op = self._call("POST", f"{path}/setLabels", subject, project, json={
            "labels": labels, "labelFingerprint": current.get("labelFingerprint", ""),
        })  # fmt: skip
        return f"projects/{project}/locations/{zone}/operations/{op['name']}"

    def patch_metadata(
        self, name: str, change: Callable[[dict[str, str]], dict[str, str] | None]
    ) -> Node:
        raise CloudError(
            "changing a Compute Engine TPU VM's metadata is not supported by this version of tpuctl"
        )

    def get_guest_attributes(self, name: str, query_path: str = "") -> list[dict[str, str]]:
        project, zone, node, path = self._instance(name)
        try:
            data = self._call("GET", f"{path}/getGuestAttributes", f"instance '{node}'",
                              project, params={"queryPath": query_path})  # fmt: skip
        except NotFoundError:
            return [{}]  # nothing published yet
        items = (data.get("queryValue") or {}).get("items") or []
        return [{f"{i.get('namespace', '')}/{i.get('key', '')}": i.get("value", "") for i in items}]

    def operation_status(self, name: str, subject: str) -> OperationStatus:
        project, zone, op_name = _parts(name)
        op = self._call("GET", f"projects/{project}/zones/{zone}/operations/{op_name}",
                        f"operation {op_name}", project)  # fmt: skip
        return OperationStatus(
            op.get("status") == "DONE", compute_wire.operation_error(op, subject)
        )

    # -- what a zone offers ------------------------------------------------------
    def accelerator_types(self, parent: str) -> list[str]:
        project, zone = parent.split("/")[1], parent.split("/")[3]
        page = self._call("GET", f"projects/{project}/zones/{zone}/machineTypes",
                          f"zone {zone}", project)  # fmt: skip
        shapes = [compute_wire.shape_of(str(m.get("name", ""))) for m in page.get("items") or []]
        return [s.name for s in shapes if s is not None]

    def runtime_versions(self, parent: str) -> list[str]:
        return sorted(set(compute_wire.IMAGE_FAMILIES.values()))

    # -- queued requests: the TPU API's ---------------------------------------------
    def _no_queue(self) -> UsageError:
        return UsageError(
            "queued resources are the Cloud TPU API's; Compute Engine's flex-start is not "
            "supported by this version of tpuctl"
        )

    def create_queued_resource(
        self, parent: str, qr_id: str, spec: CreateSpec, queue: QueueSpec
    ) -> str | None:
        raise self._no_queue()

    def get_queued_resource(self, name: str) -> QueuedResource:
        raise NotFoundError(f"no queued resource {name} on Compute Engine")

    def list_queued_resources(self, parent: str) -> list[QueuedResource]:
        return []

    def delete_queued_resource(self, name: str, force: bool = True) -> str | None:
        return None
