"""A third TPU API, as small as the backend protocol allows.

It proves the seam: registered in `cloud/registry.py`'s list (a test does it with
monkeypatch), it is listed, described, created, run on, deleted and collected by the
same services and commands as the Cloud TPU API and Compute Engine, with no change to
either.

A node it creates stands on a Cloud TPU API node of the same name in a project of its
own (`stands_in`: the user's project with `-lab` after it), so the Cloud TPU API's
adapter never lists it in the user's project: the lab reads and changes that node
through the TPU API's adapter and reports it as its own (`api="lab"`, in the user's
project, of the lab's type). Its workers are that node's, so a run reaches them over
SSH, its agent (`--target lab:NAME`, tests/backends/lab_vm.py) acts on that node, and
its metrics are that node's `tpu_worker` series, in the lab's project
(`monitored_workers`).
Nodes a test plants in `nodes` are the lab's alone: kept in memory, with no workers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tpuctl.catalog import shape
from tpuctl.catalog.shapes import SliceShape
from tpuctl.cloud.backend import BackendDefaults, BackendKind, MonitoredWorkers, TpuBackend
from tpuctl.errors import NotFoundError
from tpuctl.models import CreateSpec, Node, OperationStatus, QueuedResource, QueueSpec

STANDS_ON = {"lab-8": "v3-8"}  # the lab's type -> the Cloud TPU API's it stands on
SUFFIX = "-lab"


def stands_in(name: str) -> str:
    """The Cloud TPU API name under a lab name (a node's or a location's)."""
    parts = name.split("/")
    parts[1] += SUFFIX
    return "/".join(parts)


def _as_lab(node: Node) -> Node:
    lab_type = {v: k for k, v in STANDS_ON.items()}.get(node.accelerator_type)
    return dataclasses.replace(
        node,
        project=node.project.removesuffix(SUFFIX),
        api=KIND.key,
        accelerator_type=lab_type or node.accelerator_type,
        shape=None,
    )


class LabTpus(BackendDefaults):
    """The lab's nodes: those planted in `nodes` (by full name), and those it made, each
    on a Cloud TPU API node in the lab's own project."""

    nodes: dict[str, Node] = {}  # one store for every adapter the factory makes
    deleted: list[str] = []

    def __init__(self, factory: Any) -> None:
        self.kind = KIND
        self._factory = factory
        self._tpu: TpuBackend | None = None

    @property
    def tpu(self) -> TpuBackend:
        """The Cloud TPU API's adapter, on which the lab's nodes stand (made when asked)."""
        if self._tpu is None:
            from tpuctl.cloud import tpu

            self._tpu = tpu.KIND.build(self._factory)
        return self._tpu

    def _planted(self, name: str) -> Node | None:
        return self.nodes.get(name)

    def get_node(self, name: str) -> Node:
        planted = self._planted(name)
        return planted if planted is not None else _as_lab(self.tpu.get_node(stands_in(name)))

    def list_nodes(self, parent: str) -> list[Node]:
        project, zone = parent.split("/")[1], parent.split("/")[3]
        mine = [n for n in self.nodes.values() if n.project == project and zone in ("-", n.zone)]
        return mine + [_as_lab(n) for n in self.tpu.list_nodes(stands_in(parent))]

    def create_node(self, parent: str, spec: CreateSpec) -> str | None:
        under = shape(STANDS_ON[spec.shape.name])
        on = dataclasses.replace(spec, shape=under, version=self.tpu.default_runtime(under))
        return self.tpu.create_node(stands_in(parent), on)

    def delete_node(self, name: str) -> str | None:
        self.deleted.append(name)
        if self.nodes.pop(name, None) is not None:
            return None
        return self.tpu.delete_node(stands_in(name))

    def stop_node(self, name: str) -> str | None:
        planted = self._planted(name)
        if planted is None:
            return self.tpu.stop_node(stands_in(name))
        planted.state = "STOPPED"
        return None

    def start_node(self, name: str) -> str | None:
        planted = self._planted(name)
        if planted is None:
            return self.tpu.start_node(stands_in(name))
        planted.state = "READY"
        return None

    def gone_state(self, name: str) -> str:
        return self.tpu.gone_state(stands_in(name))

    def set_labels(self, name: str, labels: dict[str, str]) -> str:
        planted = self._planted(name)
        if planted is None:
            return self.tpu.set_labels(stands_in(name), labels)
        planted.labels = dict(labels)
        return ""

    def patch_metadata(
        self, name: str, change: Callable[[dict[str, str]], dict[str, str] | None]
    ) -> Node:
        planted = self._planted(name)
        if planted is None:
            return _as_lab(self.tpu.patch_metadata(stands_in(name), change))
        changed = change(dict(planted.metadata))
        if changed is not None:
            planted.metadata = changed
        return planted

    def get_guest_attributes(self, name: str, query_path: str = "") -> list[dict[str, str]]:
        planted = self._planted(name)
        if planted is None:
            return self.tpu.get_guest_attributes(stands_in(name), query_path)
        return [{} for _ in planted.workers]

    def operation_status(self, name: str, subject: str) -> OperationStatus:
        return self.tpu.operation_status(name, subject)  # only the TPU API's operations

    def monitored_workers(self, node: Node, workers: list[int]) -> MonitoredWorkers:
        # its node's series, by the same name, in the project that node is in
        on = self.tpu.monitored_workers(node, workers)
        return dataclasses.replace(on, project=stands_in(node.full_name).split("/")[1])

    def whole_at_once(self, shape: SliceShape) -> bool:
        return True

    def accelerator_types(self, parent: str) -> list[str]:
        return list(STANDS_ON)

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
    return LabTpus(factory)


KIND = BackendKind(
    key="lab",
    title="Lab TPUs",
    called="the lab's TPUs",
    service="lab.example.com",
    type_name=lambda shape: shape.name if shape.name.startswith("lab-") else None,
    build=_build,
    agent_module=str(Path(__file__).with_name("lab_vm.py")),  # its VM target
)
