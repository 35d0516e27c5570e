"""The Cloud TPU API's calls on the backend (a mixin of `services.Backend`): nodes and
operations (tpu/api.py), queued resources (tpu/queued.py), maintenance
(tpu/maintenance.py), and what the workers read of a node under the lock."""

from __future__ import annotations

from typing import Any

from tpuctl.emulator.core.backend import BackendCore
from tpuctl.emulator.core.locking import locked
from tpuctl.emulator.tpu import api as tpu_api
from tpuctl.emulator.tpu import maintenance as tpu_maintenance
from tpuctl.emulator.tpu import nodes as tpu_nodes
from tpuctl.emulator.tpu import queued
from tpuctl.emulator.tpu.models import Node, Operation, Page, QueuedResource


class TpuCalls(BackendCore):
    tpu_grpc_endpoint: str | None = None  # the TPU API over gRPC (tpu/grpc_front.py)

    # -- what listeners read, under the lock (no transitions applied) ---------------
    @property
    def nodes(self) -> dict[str, Node]:
        """Every node by full name; read it with the lock held (listeners do)."""
        return self.state.nodes

    @property
    def operations(self) -> dict[str, Operation]:
        return self.state.operations

    def publish(self, node: Node, worker: int, items: list[dict[str, str]]) -> None:
        """Publish guest attributes on a worker of `node`, as its guest agent would."""
        with self.lock:
            if any(item not in node.guest_attributes[worker] for item in items):
                node.set_guest_attributes(worker, items)
                self.state.changed()

    # -- nodes and operations (tpu/api.py) ---------------------------------------------
    @locked
    def create_node(self, project: str, zone: str, node_id: str, body: dict[str, Any]) -> Operation:
        return tpu_api.create_node(self.state, project, zone, node_id, body)

    @locked
    def get_node(self, project: str, zone: str, node_id: str) -> Node:
        return tpu_api.get_node(self.state, project, zone, node_id)

    @locked
    def guest_view(self, project: str, zone: str, node_id: str) -> tuple[Node, bool]:
        """What a worker's metadata server shows: the node, and whether its preemption
        notice has begun (it still looks READY then)."""
        node = tpu_nodes.node(self.state, project, zone, node_id, "tpu.nodes.get")
        return node, node.transition == "preempt" or node.state == "PREEMPTED"

    @locked
    def list_nodes(self, project: str, zone: str, page_size: int = 0, page_token: str = "") -> Page:
        return tpu_api.list_nodes(self.state, project, zone, page_size, page_token)

    @locked
    def delete_node(self, project: str, zone: str, node_id: str) -> Operation:
        return tpu_api.delete_node(self.state, project, zone, node_id)

    @locked
    def stop_node(
        self, project: str, zone: str, node_id: str, body: dict[str, Any] | None = None
    ) -> Operation:
        return tpu_api.power(self.state, project, zone, node_id, "stop", body or {})

    @locked
    def start_node(
        self, project: str, zone: str, node_id: str, body: dict[str, Any] | None = None
    ) -> Operation:
        return tpu_api.power(self.state, project, zone, node_id, "start", body or {})

    @locked
    def perform_maintenance(self, project: str, zone: str, node_id: str) -> Operation:
        node = tpu_nodes.node(self.state, project, zone, node_id, "tpu.nodes.update")
        return tpu_maintenance.perform(self.state, node, simulate=False)

    @locked
    def simulate_maintenance_event(
        self, project: str, zone: str, node_id: str, body: dict[str, Any] | None = None
    ) -> Operation:
        node = tpu_nodes.node(self.state, project, zone, node_id, "tpu.nodes.update")
        return tpu_maintenance.perform(self.state, node, simulate=True)

    @locked
    def update_node(
        self, project: str, zone: str, node_id: str, update_mask: str, body: dict[str, Any]
    ) -> Operation:
        return tpu_api.update_node(self.state, project, zone, node_id, update_mask, body)

    @locked
    def get_guest_attributes(
        self, project: str, zone: str, node_id: str, body: dict[str, Any]
    ) -> tuple[str, list[list[dict[str, str]]]]:
        return tpu_api.get_guest_attributes(self.state, project, zone, node_id, body)

    @locked
    def get_operation(self, project: str, zone: str, op_id: str) -> Operation:
        return tpu_api.get_operation(self.state, project, zone, op_id)

    @locked
    def list_operations(
        self, project: str, zone: str, page_size: int = 0, page_token: str = ""
    ) -> Page:
        return tpu_api.list_operations(self.state, project, zone, page_size, page_token)

    # -- queued resources (tpu/queued.py) --------------------------------------------------
    @locked
    def create_queued_resource(
        self,
        project: str,
        zone: str,
        qr_id: str,
        body: dict[str, Any],
        alpha: dict[str, Any] | None = None,
    ) -> Operation:
        return queued.create(self.state, project, zone, qr_id, body, alpha)

    @locked
    def get_queued_resource(self, project: str, zone: str, qr_id: str) -> QueuedResource:
        return queued.get(self.state, project, zone, qr_id)

    @locked
    def list_queued_resources(
        self, project: str, zone: str, page_size: int = 0, page_token: str = ""
    ) -> Page:
        return queued.list_page(self.state, project, zone, page_size, page_token)

    @locked
    def delete_queued_resource(
        self, project: str, zone: str, qr_id: str, force: bool = False
    ) -> Operation:
        return queued.delete(self.state, project, zone, qr_id, force)

    @locked
    def all_queued(self) -> list[QueuedResource]:
        return queued.all_requests(self.state)

    @locked
    def queued_control(self, action: str, name: str, message: str | None = None) -> QueuedResource:
        """Fail, suspend or provision (ignoring capacity) a queued resource now."""
        return queued.control(self.state, action, name, message)
