"""The emulator's own control plane as the backend answers it (a mixin of
`services.Backend`): status, config, reset, faults, transitions, preemption and
maintenance (control/api.py, control/maintenance.py), under the lock discipline of
`core/locking.py`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from tpuctl.emulator.control import api as control_api
from tpuctl.emulator.control import maintenance as control_maintenance
from tpuctl.emulator.core.backend import BackendCore
from tpuctl.emulator.core.locking import locked
from tpuctl.emulator.monitoring import models as monitoring
from tpuctl.emulator.tpu.models import Node
from tpuctl.emulator.workers.chips import Chips
from tpuctl.emulator.workers.files import WorkerFiles


class ControlCalls(BackendCore):
    workers: WorkerFiles
    chips: Chips
    monitoring: monitoring.Monitoring
    storage_endpoint: str | None
    monitoring_endpoint: str | None
    tpu_grpc_endpoint: str | None
    ssh_port: int | None
    clear_storage: Callable[[], None] | None

    def draw_fault(self, target: str) -> tuple[float, int | None, bool, bool]:
        """See `control.api.draw_fault` (no transitions: this is no API call yet)."""
        with self.lock:
            return control_api.draw_fault(self.state, target)

    @locked
    def status(self) -> dict:
        return {
            "ok": True,
            "nodes": len(self.state.nodes),
            "defaults": dict(self.state.defaults),
            "storage_endpoint": self.storage_endpoint,  # the proxy (storage/proxy.py)
            "ssh_port": self.ssh_port,
            "caller": self.state.access.caller,
            "monitoring_endpoint": self.monitoring_endpoint,
            "tpu_grpc_endpoint": self.tpu_grpc_endpoint,
            # the services' own ports (service.Front), e.g. `registry_endpoint`
            **{f"{name}_endpoint": address for name, address in self.front_endpoints.items()},
            # the Cloud Billing Catalog API (billing/), served on the emulator's own port
            "billing_endpoint": f"http://{self.endpoint}" if self.endpoint else None,
            "workers_sandbox": self.workers.sandbox.mode,
        }

    @locked
    def config(self) -> dict:
        return self.state.config()

    @locked
    def update_config(self, body: dict[str, Any]) -> dict:
        return self.state.update_config(body)

    @locked
    def reset(self) -> dict:
        self.state.clear()  # the address allocator carries on: addresses are never reused
        for listener in self.listeners:
            listener()  # the workers of the nodes just gone stop before their bucket goes
        if self.clear_storage is not None:
            self.clear_storage()  # every bucket and object goes too
        self.monitoring.clear()  # every point, and the sampling settings
        self.chips.forget()  # the workers' metrics servers (workers/chips.py)
        self.requests.clear()
        return self.status()

    @locked
    def faults_config(self) -> dict:
        return asdict(self.state.faults)

    @locked
    def set_faults(self, body: dict[str, Any]) -> dict:
        return control_api.set_faults(self.state, body)

    @locked
    def advance(self, node: str | None = None) -> dict:
        """Complete pending transitions now: of one node, or of all."""
        return control_api.advance(self.state, node)

    @locked
    def all_nodes(self) -> list[Node]:
        return control_api.all_nodes(self.state)

    @locked
    def set_guest_attributes(self, node: str, worker: int, items: list[dict[str, str]]) -> dict:
        return control_api.set_guest_attributes(self.state, node, worker, items)

    @locked
    def set_node_state(self, body: dict[str, Any]) -> Node:
        return control_api.set_node_state(self.state, body)

    @locked
    def preempt(self, node: str, notice: float | None = None) -> Node:
        return control_api.preempt(self.state, node, notice)

    @locked
    def maintenance(self, body: dict[str, Any]) -> dict[str, Any]:
        """Announce a host maintenance on a node or VMs (control/maintenance.py)."""
        return control_maintenance.maintenance(self.state, body)
