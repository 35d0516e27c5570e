"""MonitoringApi: the adapter over Cloud Monitoring (monitoring.googleapis.com), read-only.

tpuctl reads the per-worker metrics Cloud TPU publishes (docs/metrics.md) with Google's
google-cloud-monitoring (`MetricServiceClient.list_time_series`; the library speaks gRPC
only). Every call goes through `cloud/retry.call` and `cloud/errors.translate`; series
cross this boundary as `Series`. Google's libraries are imported inside the calls.
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


def _value(point: Any) -> float:
    which = type(point.value).pb(point.value).WhichOneof("value")
    return float(getattr(point.value, which)) if which else 0.0


class MonitoringApi:
    """The time series of a project's TPU workers."""

    def __init__(self, client: Any, where: str = "Cloud Monitoring", unreachable_hint: str = ""):
        self._client = client
        self._where = where
        self._hint = unreachable_hint

    def _call(self, project: str, fn: Callable[[], T]) -> T:
        from tpuctl.cloud.retry import call

        return call(fn, lambda e: translate(e, project, self._where, self._hint))

    def resource_types(self, project: str, metric: str) -> list[str]:
        """The monitored resources `metric` is written on, from its descriptor
        (`metricDescriptors.list`); [] when the project has no such metric."""
        request = {"name": f"projects/{project}", "filter": f'metric.type = "{metric}"'}

        def read() -> list[str]:
            found: list[str] = []
            for d in self._client.list_metric_descriptors(request=request):
                found += [t for t in d.monitored_resource_types if t not in found]
            return found

        return self._call(project, read)

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
        request: dict[str, Any] = {
            "name": f"projects/{project}",
            "filter": filter_,
            "interval": {
                "start_time": {"seconds": int(begin)},
                "end_time": {"seconds": int(end) + 1},
            },
        }
        if aligner:
            request["aggregation"] = {
                "alignment_period": {"seconds": period},
                "per_series_aligner": aligner,
            }

        def read() -> list[Series]:
            out = []
            for ts in self._client.list_time_series(request=request):
                points = [
                    (p.interval.end_time.timestamp(), _value(p)) for p in ts.points
                ]  # newest first, as the API returns them
                out.append(Series(metric, dict(ts.resource.labels), dict(ts.metric.labels), points))
            return out

        return self._call(project, read)
