"""Cloud Monitoring, as the agent reads it about its own worker: how long its TensorCores
have been idle (`tpu/tensorcore/idle_duration`, REST at TPUCTL_MONITORING_URL, read once
at import, Google's by default), the evidence the idle watchdog (idle.py) and the
checkup (checkup.py) weigh against a process that holds the TPU but uses little CPU.
Which series is this worker's depends on what it runs on: each target class
(target.py) picks `tensorcore_idle` or `vm_tensorcore_idle`.

Standard library only, Python 3.8+, like every module of the agent (bundle.py).
"""

from __future__ import annotations

import calendar
import json
import os
import time
from typing import Any
from urllib.parse import urlencode

from .labels import number as _number
from .metadata import Token, metadata
from .net import HttpError, http

MONITORING_URL = os.environ.get(
    "TPUCTL_MONITORING_URL", "https://monitoring.googleapis.com"
).rstrip("/")  # Cloud Monitoring's REST API: idle_duration is read there

IDLE_METRIC = "tpu.googleapis.com/tpu/tensorcore/idle_duration"
# sampled every 60 s, visible up to 180 s later: an older point is no evidence
STALE = 60 + 180 + 60


def rfc3339(value: Any) -> float | None:
    if not isinstance(value, str) or len(value) < 19:
        return None
    try:
        return float(calendar.timegm(time.strptime(value[:19], "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None


def stamp(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


def tensorcore_idle(token: Token, name: str, worker: int, now: float) -> float | None:
    """How long this worker's TensorCores have all been idle, in seconds: its least idle
    chip's newest `idle_duration` point in Cloud Monitoring. None when a point is missing
    or older than STALE, or Monitoring cannot be read (no evidence: holders stay busy)."""
    parts = name.split("/")  # projects/P/locations/Z/nodes/N
    project, zone, node = parts[1], parts[3], parts[5]
    return _newest_idle(
        token,
        project,
        now,
        f'resource.type = "tpu_worker" AND '
        f'resource.labels.zone = "{zone}" AND resource.labels.node_id = "{node}" '
        f'AND resource.labels.worker_id = "{worker}"',
    )


def vm_tensorcore_idle(token: Token, project: str, zone: str, now: float) -> float | None:
    """`tensorcore_idle` of this Compute Engine VM. Which monitored resource its points
    are on is asked of the metric's descriptor (`metricDescriptors.list`), as tpuctl's
    client does (docs/metrics.md): `gce_instance` by this VM's id, `tpu_worker` by its
    name."""
    query = urlencode({"filter": f'metric.type = "{IDLE_METRIC}"'})
    try:
        body = http(
            "GET",
            f"{MONITORING_URL}/v3/projects/{project}/metricDescriptors?{query}",
            headers=token.headers(),
            attempts=3,
            timeout=30,
        )[2]
        kinds = [
            k
            for d in json.loads(body).get("metricDescriptors") or []
            for k in d.get("monitoredResourceTypes") or []
        ]
        me, my_id = metadata("instance/name").strip(), metadata("instance/id").strip()
    except (HttpError, ValueError):
        return None
    where = {
        "gce_instance": f'resource.labels.instance_id = "{my_id}"',
        "tpu_worker": f'resource.labels.node_id = "{me}"',
    }
    values = [
        _newest_idle(
            token,
            project,
            now,
            f'resource.type = "{kind}" AND resource.labels.zone = "{zone}" AND {where[kind]}',
        )
        for kind in dict.fromkeys(kinds)
        if kind in where
    ]
    found = [v for v in values if v is not None]
    return min(found) if found else None


def _newest_idle(token: Token, project: str, now: float, resource: str) -> float | None:
    """The least idle chip's newest fresh `idle_duration` point of the series `resource`
    (a filter on resource.type and labels) selects; None without fresh evidence."""
    query = urlencode(
        {
            "filter": f'metric.type = "{IDLE_METRIC}" AND {resource}',
            "interval.startTime": stamp(now - STALE),
            "interval.endTime": stamp(now + 1),
        }
    )
    url = f"{MONITORING_URL}/v3/projects/{project}/timeSeries?{query}"
    try:
        body = http("GET", url, headers=token.headers(), attempts=3, timeout=30)[2]
        found = json.loads(body).get("timeSeries") or []
    except (HttpError, ValueError):
        return None
    values = []
    for series in found:
        points = series.get("points") or []
        if not points:
            continue
        newest = points[0]  # the API returns points newest first
        at = rfc3339((newest.get("interval") or {}).get("endTime"))
        value = newest.get("value") or {}
        number = _number(value.get("int64Value", value.get("doubleValue")))
        if at is None or number is None or now - at > STALE:
            return None
        values.append(number)
    return min(values) if values else None
