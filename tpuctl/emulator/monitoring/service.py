"""Cloud Monitoring: its REST routes, and its gRPC front with the sampler, which start
with the server."""

from __future__ import annotations

from typing import Any

from tpuctl.emulator.core.service import Front, Service
from tpuctl.emulator.monitoring import urls


class _Served:
    """The gRPC front and the sampler (`backend.monitoring`), stopped together."""

    def __init__(self, grpc: Any, sampler: Any) -> None:
        self.grpc, self.sampler = grpc, sampler

    @property
    def port(self) -> int:
        return int(self.grpc.port)

    @property
    def address(self) -> str:
        return str(self.grpc.address)

    def stop(self) -> None:
        self.sampler.stop()
        self.grpc.stop()


def _start(backend: Any, host: str, port: int, state_dir: Any, verbose: bool) -> Any:
    """ListTimeSeries over gRPC, before the HTTP server answers: a client that sees the
    status sees its address (importing grpc takes a moment)."""
    from tpuctl.emulator.monitoring.grpc_front import MonitoringGrpc

    def gate(project: str) -> None:
        """A gRPC ListTimeSeries passes the gate REST calls pass (counted as `RPC
        timeSeries.list`): a project with Cloud Monitoring off gets SERVICE_DISABLED."""
        backend.requests.count("RPC timeSeries.list")
        backend.admit("timeSeries.list", project, f"/v3/projects/{project}/timeSeries")

    grpc = MonitoringGrpc(backend.monitoring, host, port, gate).start()
    backend.monitoring_endpoint = grpc.address  # the status's `monitoring_endpoint`
    return _Served(grpc, backend.monitoring.start())


SERVICE = Service(
    "monitoring.googleapis.com",
    tuple(urls.ROUTES),
    fronts=(Front("monitoring", _start, shown=False),),
)
