"""The Cloud TPU API (tpu.googleapis.com, v2) through google-cloud-tpu: `api.TpuApi`, the
adapter, on `transport.py`'s client, REST session and call seam; `wire.py`, its request
bodies and answers; `quota_check.py` and `usage.py`, its quota pool (the Cloud Quotas
API's `tpu.googleapis.com` limits).

This module loads no client library: it is the registry's entry (`cloud/registry.py`).
"""

from __future__ import annotations

from typing import Any

from tpuctl.catalog.shapes import SliceShape
from tpuctl.cloud.backend import BackendKind


def _type_name(shape: SliceShape) -> str | None:
    return shape.tpu_type  # a name tpuctl does not know: itself, the API the judge


def _build(factory: Any) -> Any:
    return factory.tpu()


KIND = BackendKind(
    key="tpu",
    title="Cloud TPU API",
    called="the Cloud TPU API",
    service="tpu.googleapis.com",
    type_name=_type_name,
    build=_build,
    queues_flex_start=True,  # cloud.google.com/tpu/docs/request-using-flex-start
    lists_requests=True,  # queued resources, a resource of their own
    reports_quota=True,  # the catalogue's quota table is tpu.googleapis.com's
    preference=1,  # a shape it shares (v6e, v5p): here, where existing projects have quota
    judges_unknown=True,  # a name tpuctl does not know is passed on as it is
    metrics_resource="tpu_worker",
)
