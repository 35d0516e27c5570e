"""A third TPU API, as small as the backend protocol allows: nodes kept in memory.

It proves the seam: registered in `cloud/registry.py`'s list (a test does it with
monkeypatch), it is listed, described, deleted and collected by the same services and
commands as the Cloud TPU API and Compute Engine, with no change to either.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tpuctl.catalog.shapes import SliceShape
from tpuctl.cloud.backend import BackendDefaults, BackendKind
from tpuctl.errors import NotFoundError
from tpuctl.models import CreateSpec, Node, OperationStatus, QueuedResource, QueueSpec


class LabTpus(BackendDefaults):
    """Nodes in a dict, by full name; every call succeeds at once."""

    nodes: dict[str, Node] = {}  # one store for every adapter the factory makes
    deleted: list[str] = []

    def __init__(self) -> None:
        self.kind = KIND

    def _node(self, name: str) -> Node:
        try:
            return self.nodes[name]
        except KeyError:
            raise NotFoundError(f"node {name.rsplit('/', 1)[-1]} not found") from None

    def get_node(self, name: str) -> Node:
        return self._node(name)

    def list_nodes(self, parent: str) -> list[Node]:
        project, zone = parent.split("/")[1], parent.split("/")[3]
        return [n for n in self.nodes.values() if n.project == project and zone in ("-", n.zone)]

    def create_node(self, parent: str, spec: CreateSpec) -> str | None:
        project, zone = parent.split("/")[1], parent.split("/")[3]
        labels = dict(spec.labels)
        node = Node(spec.name, project, zone, spec.shape.name, "READY", labels=labels, api="lab")
        self.nodes[node.full_name] = node
        return None

    def delete_node(self, name: str) -> str | None:
        self._node(name)
        del self.nodes[name]
        self.deleted.append(name)
        return None

    def stop_node(self, name: str) -> str | None:
        self._node(name).state = "STOPPED"
        return None

    def start_node(self, name: str) -> str | None:
        self._node(name).state = "READY"
        return None

    def set_labels(self, name: str, labels: dict[str, str]) -> str:
        self._node(name).labels = dict(labels)
        return ""

    def patch_metadata(
        self, name: str, change: Callable[[dict[str, str]], dict[str, str] | None]
    ) -> Node:
        node = self._node(name)
        changed = change(dict(node.metadata))
        if changed is not None:
            node.metadata = changed
        return node

    def get_guest_attributes(self, name: str, query_path: str = "") -> list[dict[str, str]]:
        return [{} for _ in self._node(name).workers]

    def operation_status(self, name: str, subject: str) -> OperationStatus:
        return OperationStatus(True)

    def whole_at_once(self, shape: SliceShape) -> bool:
        return True

    def accelerator_types(self, parent: str) -> list[str]:
        return ["lab-8"]

    def runtime_versions(self, parent: str) -> list[str]:
        return ["lab-os"]

    def create_queued_resource(
        self, parent: str, qr_id: str, spec: CreateSpec, queue: QueueSpec
    ) -> str | None:
        raise NotImplementedError("the lab has no queue")

    def get_queued_resource(self, name: str) -> QueuedResource:
        raise NotFoundError(f"queued resource {name.rsplit('/', 1)[-1]} not found")

    def list_queued_resources(self, parent: str) -> list[QueuedResource]:
        return []

    def delete_queued_resource(self, name: str, force: bool = True) -> str | None:
        return None


def _build(factory: Any) -> LabTpus:
    return LabTpus()


KIND = BackendKind(
    key="lab",
    title="Lab TPUs",
    called="the lab's TPUs",
    service="lab.example.com",
    type_name=lambda shape: shape.name if shape.name.startswith("lab-") else None,
    build=_build,
    agent_module=str(Path(__file__).with_name("lab_vm.py")),  # its VM target
)
