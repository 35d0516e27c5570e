"""The Cloud Monitoring (monitoring.googleapis.com) REST path: time series of the TPU
workers and the metrics' descriptors (the gRPC front, `grpc_front.py`, serves the same
over gRPC)."""

from __future__ import annotations

from tpuctl.emulator.core.routes import Route

ROUTES: list[Route] = [
    (
        "GET",
        r"/v3/projects/(?P<project>[^/]+)/timeSeries",
        "timeSeries.list",
        "monitoring.list_time_series",
        ("project", "query"),
    ),
    (
        "GET",
        r"/v3/projects/(?P<project>[^/]+)/metricDescriptors",
        "metricDescriptors.list",
        "monitoring.list_metric_descriptors",
        ("project", "query"),
    ),
]
