"""MonitoringApi: the adapter over Cloud Monitoring (monitoring.googleapis.com), read-only.

tpuctl reads the per-worker metrics Cloud TPU publishes (docs/metrics.md) with
`projects.timeSeries.list` over REST through google-auth's authorised session
(`cloud/rest.py`): google-cloud-monitoring speaks gRPC only, and importing it with grpc
costs more than a whole `tpuctl list` may. Every call is retried and translated as the
other adapters' are; series cross this boundary as `Series`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tpuctl.errors import TpuctlError

T = TypeVar("T")
MONITORING_API = "monitoring.googleapis.com"
RESOURCE = "tpu_worker"  # a Cloud TPU API node's worker (node_id, worker_id, zone)
COMPUTE_RESOURCE = "gce_instance"  # a Compute Engine VM (instance_id, zone)
IDLE = "tpu.googleapis.com/tpu/tensorcore/idle_duration"
TENSORCORE = "tpu.googleapis.com/accelerator/tensorcore_utilization"


@dataclass(frozen=True)
class Series:
    """One time series of one worker (and chip): its labels and points, newest first."""

    metric: str
    resource: dict[str, str]
    labels: dict[str, str] = field(default_factory=dict)
    points: list[tuple[float, float]] = field(default_factory=list)  # (end time, value)

    @property
    def node_id(self) -> str:
        return self.resource.get("node_id", "")

    @property
    def zone(self) -> str:
        return self.resource.get("zone", "")

    @property
    def instance_id(self) -> str:
        """The Compute Engine VM's id, on a `gce_instance` series ("" on `tpu_worker`)."""
        return self.resource.get("instance_id", "")

    @property
    def worker(self) -> int:
        return int(self.resource.get("worker_id") or 0)


def translate(exc: BaseException, project: str, where: str, hint: str) -> TpuctlError:
    """Google's exception -> tpuctl's, naming the API to enable or the role to grant."""
    from google.api_core import exceptions as gx

    from tpuctl.cloud.errors import refused
    from tpuctl.cloud.errors import translate as common

    if isinstance(exc, gx.PermissionDenied | gx.Forbidden):
        return refused(
            exc,
            project=project,
            what="metrics",
            needs="monitoring.timeSeries.list, e.g. through the role roles/monitoring.viewer",
        )
    return common(exc, f"metrics of project {project}", where, hint)


def _value(value: dict[str, Any]) -> float:
    """A TypedValue's JSON (`{"doubleValue": 1.5}`, `{"int64Value": "3"}`) as a number."""
    for key in ("doubleValue", "int64Value", "boolValue"):
        if key in value:
            return float(value[key])
    return 0.0


def _end(point: dict[str, Any]) -> float:
    from tpuctl.timestamps import parse_rfc3339

    return parse_rfc3339(str((point.get("interval") or {}).get("endTime"))).timestamp()


def _rfc3339(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


class MonitoringApi:
    """The time series of a project's TPU workers."""

    def __init__(
        self,
        session: Callable[[], Any],
        endpoint: str = "https://monitoring.googleapis.com",
        where: str = "Cloud Monitoring",
        unreachable_hint: str = "",
    ):
        self._session = session
        self._endpoint = endpoint.rstrip("/")
        self._where = where
        self._hint = unreachable_hint

    def _call(self, project: str, fn: Callable[[], T]) -> T:
        from tpuctl.cloud.retry import call

        return call(fn, lambda e: translate(e, project, self._where, self._hint))

    def resource_types(self, project: str, metric: str) -> list[str]:
        """The monitored resources `metric` is written on, from its descriptor
        (`projects.metricDescriptors.list`); [] when the project has no such metric."""
        params = {"filter": f'metric.type = "{metric}"'}
        found: list[str] = []
        while True:
            page = self._get(project, "metricDescriptors", params)
            for d in page.get("metricDescriptors") or []:
                found += [t for t in d.get("monitoredResourceTypes") or [] if t not in found]
            token = str(page.get("nextPageToken") or "")
            if not token:
                return found
            params = {**params, "pageToken": token}

    def _page(self, project: str, params: dict[str, str]) -> dict[str, Any]:
        """One page of `projects.timeSeries.list`, retried and translated."""
        return self._get(project, "timeSeries", params)

    def _get(self, project: str, collection: str, params: dict[str, str]) -> dict[str, Any]:
        from tpuctl.cloud import rest

        url = f"{self._endpoint}/v3/projects/{project}/{collection}"
        page: dict[str, Any] = self._call(
            project, lambda: rest.send(self._session, "GET", url, params=params)
        )
        return page

    def series(
        self,
        project: str,
        metric: str,
        *,
        resource: str = RESOURCE,
        zone: str | None = None,
        nodes: list[str] | None = None,
        minutes: float = 15,
        start: float | None = None,
        aligner: str | None = None,
        period: int = 60,
        now: float | None = None,
    ) -> list[Series]:
        """The series of `metric` of every TPU worker of `project` (or of one zone) over the
        last `minutes` (or since `start`; of the nodes `nodes` only, if given): raw points,
        or one per `period` seconds with `aligner`."""
        end = time.time() if now is None else now
        begin = end - minutes * 60 if start is None else start
        filter_ = f'metric.type = "{metric}" AND resource.type = "{resource}"'
        if zone:
            filter_ += f' AND resource.labels.zone = "{zone}"'
        if nodes:
            quoted = ", ".join(f'"{n}"' for n in sorted(set(nodes)))
            filter_ += f" AND resource.labels.node_id = one_of({quoted})"
        params = {
            "filter": filter_,
            "interval.startTime": _rfc3339(int(begin)),
            "interval.endTime": _rfc3339(int(end) + 1),
        }
        if aligner:
            params["aggregation.alignmentPeriod"] = f"{period}s"
            params["aggregation.perSeriesAligner"] = aligner
        out = []
        token = ""
        while True:
            page = self._page(project, {**params, "pageToken": token} if token else params)
            for ts in page.get("timeSeries") or []:
                # newest first, as the API returns them
                points = [(_end(p), _value(p.get("value") or {})) for p in ts.get("points") or []]
                on = (ts.get("resource") or {}).get("labels") or {}
                labels = (ts.get("metric") or {}).get("labels") or {}
                out.append(Series(metric, dict(on), dict(labels), points))
            token = str(page.get("nextPageToken") or "")
            if not token:
                return out
