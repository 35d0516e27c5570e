"""The seam between tpuctl's services and a TPU API: what services ask of one, in
tpuctl's own values.

`TpuApi` (`cloud/tpu.py`, the Cloud TPU API through google-cloud-tpu) is the first
implementation; a Compute Engine adapter (VM instances, and for a multi-host slice a
workload policy, an instance template and a managed instance group) is the second. An
adapter builds the API's request bodies, reads its answers into `Node` and
`QueuedResource`, waits on its operations and turns its failures into tpuctl's typed
errors (`NoCapacityError`, `QuotaError`, `PermissionDeniedError`, `ServiceDisabledError`,
`NotFoundError`, `AlreadyExistsError`, `CloudError`). Services never see wire JSON, and
nothing above `cloud/` knows which API is behind the value it holds.

Names are full resource names in the TPU API's form,
`projects/P/locations/ZONE/nodes/NAME`, on every backend: they are how services and
users name a slice, whatever the API calls its parts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from tpuctl.models import CreateSpec, Node, OperationStatus, QueuedResource, QueueSpec
from tpuctl.shapes import SliceShape


class TpuBackend(Protocol):
    """A TPU API as tpuctl's services use it."""

    api: str  # "tpu" (the Cloud TPU API) or "compute" (Compute Engine)

    # -- nodes (a slice: one node, with one worker per host) ------------------------
    def get_node(self, name: str) -> Node: ...

    def list_nodes(self, parent: str) -> list[Node]: ...

    def create_node(self, parent: str, spec: CreateSpec) -> str | None:
        """Start the create; the operation's name, or None when a retried create adopted
        the node its lost first attempt had made."""
        ...

    def delete_node(self, name: str) -> str | None:
        """Start the delete; None when the node is already gone or going."""
        ...

    def stop_node(self, name: str) -> str | None: ...

    def start_node(self, name: str) -> str | None: ...

    def set_labels(self, name: str, labels: dict[str, str]) -> str:
        """Replace the node's labels (every VM's, on an API that labels VMs)."""
        ...

    def patch_metadata(
        self, name: str, change: Callable[[dict[str, str]], dict[str, str] | None]
    ) -> Node:
        """Read-modify-write the node's metadata until `change` says it is settled."""
        ...

    def get_guest_attributes(self, name: str, query_path: str = "") -> list[dict[str, str]]:
        """Guest attributes per worker, in worker order (`namespace/key` -> value)."""
        ...

    def operation_status(self, name: str, subject: str) -> OperationStatus: ...

    def whole_at_once(self, shape: SliceShape) -> bool:
        """Whether a create of `shape` makes one resource that becomes the node on its own
        (True), or several that are no node until all are up (False: a create of those that
        does not finish is undone, as a queued request is)."""
        ...

    # -- what a zone offers ------------------------------------------------------
    def accelerator_types(self, parent: str) -> list[str]: ...

    def runtime_versions(self, parent: str) -> list[str]: ...

    # -- queued requests (capacity asked for, to be granted later) ------------------
    def create_queued_resource(
        self, parent: str, qr_id: str, spec: CreateSpec, queue: QueueSpec
    ) -> str | None: ...

    def get_queued_resource(self, name: str) -> QueuedResource: ...

    def list_queued_resources(self, parent: str) -> list[QueuedResource]: ...

    def delete_queued_resource(self, name: str, force: bool = True) -> str | None: ...
