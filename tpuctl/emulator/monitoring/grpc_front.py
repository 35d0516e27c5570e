"""Cloud Monitoring over gRPC, the only transport google-cloud-monitoring has (2.x ships
no REST transport for MetricService): `google.monitoring.v3.MetricService/ListTimeSeries`
(and `ListMetricDescriptors`) on a port of its own, answered by the same `Monitoring`
methods as the REST path.

The request is turned into the REST query parameters through its JSON form, and the REST
answer back into the response message, so both fronts behave alike. Errors are the
ApiError's canonical status and message (no status details).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tpuctl.emulator.core.errors import ApiError
from tpuctl.emulator.core.grpc_server import GrpcFront
from tpuctl.emulator.monitoring.models import Monitoring

SERVICE = "google.monitoring.v3.MetricService"


def _query(request: Any) -> tuple[str, dict[str, str]]:
    from google.cloud.monitoring_v3 import ListTimeSeriesRequest

    data = json.loads(ListTimeSeriesRequest.to_json(request, use_integers_for_enums=False))
    query: dict[str, str] = {}
    for key in ("filter", "view", "pageToken", "orderBy"):
        if data.get(key):
            query[key] = str(data[key])
    if data.get("pageSize"):
        query["pageSize"] = str(data["pageSize"])
    for group in ("interval", "aggregation"):
        for key, value in (data.get(group) or {}).items():
            query[f"{group}.{key}"] = str(value)
    name = str(data.get("name", ""))
    return name.removeprefix("projects/"), query


class MonitoringGrpc(GrpcFront):
    """Serves ListTimeSeries on host:port (0: a free port) from a thread pool."""

    thread_prefix = "mon"

    def __init__(
        self,
        monitoring: Monitoring,
        host: str = "127.0.0.1",
        port: int = 0,
        gate: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(host, port)
        self.monitoring = monitoring
        self.gate = gate  # called with the project first: counts the call, may refuse it

    def handlers(self) -> list[Any]:
        import grpc
        from google.cloud.monitoring_v3 import (
            ListMetricDescriptorsRequest,
            ListMetricDescriptorsResponse,
            ListTimeSeriesRequest,
            ListTimeSeriesResponse,
        )

        def list_time_series(request: Any, context: Any) -> Any:
            project, query = _query(request)
            try:
                if self.gate is not None:
                    self.gate(project)
                answer = self.monitoring.list_time_series(project, query)
            except ApiError as exc:
                context.abort(getattr(grpc.StatusCode, exc.status), exc.message)
            return ListTimeSeriesResponse.from_json(json.dumps(answer))

        def list_metric_descriptors(request: Any, context: Any) -> Any:
            name = str(request.name)
            try:
                if self.gate is not None:
                    self.gate(name.removeprefix("projects/"))
                answer = self.monitoring.list_metric_descriptors(
                    name.removeprefix("projects/"), {"filter": str(request.filter)}
                )
            except ApiError as exc:
                context.abort(getattr(grpc.StatusCode, exc.status), exc.message)
            return ListMetricDescriptorsResponse.from_json(json.dumps(answer))

        handler = grpc.method_handlers_generic_handler(
            SERVICE,
            {
                "ListTimeSeries": grpc.unary_unary_rpc_method_handler(
                    list_time_series,
                    request_deserializer=ListTimeSeriesRequest.deserialize,
                    response_serializer=ListTimeSeriesResponse.serialize,
                ),
                "ListMetricDescriptors": grpc.unary_unary_rpc_method_handler(
                    list_metric_descriptors,
                    request_deserializer=ListMetricDescriptorsRequest.deserialize,
                    response_serializer=ListMetricDescriptorsResponse.serialize,
                ),
            },
        )
        return [handler]
