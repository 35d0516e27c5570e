"""Cloud Monitoring's part of the backend (a mixin of `services.Backend`): the samples it
takes of the workers (monitoring/models.py), and where its gRPC front listens."""

from __future__ import annotations

from tpuctl.emulator.compute import hosts as compute_hosts
from tpuctl.emulator.core.backend import BackendCore
from tpuctl.emulator.monitoring import models as monitoring
from tpuctl.emulator.workers.chips import Chips
from tpuctl.emulator.workers.files import WorkerFiles


class MonitoringCalls(BackendCore):
    workers: WorkerFiles
    chips: Chips
    monitoring_endpoint: str | None = None  # its gRPC address (monitoring/grpc_front.py)

    def _start_monitoring(self) -> None:
        self.monitoring = monitoring.Monitoring(self._monitored)

    def _monitored(self) -> list[monitoring.WorkerView]:
        with self.lock:  # no transitions applied: a sample is no API call
            hosts = compute_hosts.hosts(self.state)
            return monitoring.worker_views(
                self.state.nodes.values(), self.workers, self.chips
            ) + monitoring.compute_worker_views(hosts, self.workers, self.chips)
