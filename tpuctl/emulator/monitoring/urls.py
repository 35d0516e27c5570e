"""The Cloud Monitoring (monitoring.googleapis.com) REST path: time series of the TPU
workers (the gRPC front, `grpc_front.py`, serves the same over gRPC)."""

from __future__ import annotations

from tpuctl.emulator.core.routes import Route

ROUTES: list[Route] = [
    ("GET", r"/v3/projects/(?P<project>[^/]+)/timeSeries", "timeSeries.list",
     "monitoring.list_time_series", ("project", "query")),
]  # fmt: skip
