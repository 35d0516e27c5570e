"""Cloud Monitoring's `projects.timeSeries.list`, fed by what runs on the emulated workers.

Every `sample_period` seconds (60 by default; None: only when the control plane asks,
`POST /_emulator/v1/monitoring/sample`) the sampler looks at every worker of every READY
node and records one point per metric, as the TPU VM's agents do (docs/metrics.md):

- a TensorCore (one per device file in TPUCTL_TPU_DEVICES) is busy in a sample when its
  device file was written since the previous sample; the last line written may be a
  number, the percent of the TensorCore the step kept busy (e.g. `35`: an input-bound
  job), else 100. Holding the file open without writing is not work.
- its idle duration is the seconds since the file was last written (the worker's boot
  touches it);
- CPU and memory are those of the worker's processes (found by TPUCTL_EMULATOR_WORKER in
  their environment, as the emulator finds them to kill them);
- each chip's HBM used and total are what libtpu's runtime metrics show of it
  (workers/chips.py), which a test sets through the control plane (`set_chips`).

A point becomes visible `ingestion_delay` seconds after it was sampled (180 by default,
the worst case the documentation states). Points are kept in memory for a day.

The list method takes the REST query parameters (the gRPC front converts its request to
them) and answers the REST JSON; errors are `errors.ApiError`s (400 INVALID_ARGUMENT).
"""

from __future__ import annotations

import bisect
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tpuctl.emulator.core import errors
from tpuctl.emulator.monitoring.query import (
    COMPUTE_RESOURCE,
    CPU,
    DUTY,
    HBM_TOTAL,
    HBM_USED,
    IDLE,
    MEMORY,
    METRICS,
    MXU,
    RESOURCE,
    TENSORCORE,
    _page,
    _parse_request,
    _point,
    _rfc3339,
    descriptors,
    parse_filter,
)

DEFAULTS: dict[str, float | None] = {"sample_period": 60.0, "ingestion_delay": 180.0}
RETENTION = 24 * 3600.0
_CLK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass(frozen=True)
class WorkerView:
    """What the sampler needs of one worker, read under the backend's lock."""

    project: str
    zone: str
    node_id: str
    uid: str
    worker: int
    marker: str  # TPUCTL_EMULATOR_WORKER of its processes
    devices: tuple[Path, ...]
    instance_id: str = ""  # a Compute Engine VM's id: its points are on `gce_instance`
    hbm: tuple[tuple[int, int], ...] = ()  # each chip's HBM (used, total), in bytes

    @property
    def resource(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        """The monitored resource its points are on: a TPU API worker's `tpu_worker`, or
        a Compute Engine TPU VM's `gce_instance` (query.py says why)."""
        if self.instance_id:
            return COMPUTE_RESOURCE, (
                ("instance_id", self.instance_id),
                ("project_id", self.project),
                ("zone", self.zone),
            )
        return RESOURCE, (
            ("node_id", self.node_id),
            ("project_id", self.project),
            ("worker_id", str(self.worker)),
            ("zone", self.zone),
        )


@dataclass
class _Seen:
    """One worker as the previous sample saw it."""

    at: float
    mtimes: list[float]
    cpu_ticks: dict[int, int] = field(default_factory=dict)


# (metric type, resource type, resource labels, metric labels)
Series = tuple[str, str, tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]


class Monitoring:
    """The emulated Cloud Monitoring: samples, stored points, and the list method."""

    def __init__(
        self, workers: Callable[[], list[WorkerView]], clock: Callable[[], float] = time.time
    ) -> None:
        self._workers = workers
        self._clock = clock
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._stopping = False
        self.clear()

    def clear(self) -> None:
        """Back to the defaults, with no point and no worker seen."""
        with self._lock:
            self.settings: dict[str, float | None] = dict(DEFAULTS)
            self._points: dict[Series, list[tuple[float, float]]] = {}
            self._seen: dict[tuple[str, int], _Seen] = {}
            self._wake.notify_all()

    # -- settings (the control plane) ------------------------------------------------
    def config(self) -> dict[str, Any]:
        with self._lock:
            return dict(self.settings)

    def configure(self, body: dict[str, Any]) -> dict[str, Any]:
        unknown = set(body) - set(DEFAULTS)
        if unknown:
            raise errors.invalid_argument(f"unknown monitoring settings: {sorted(unknown)}")
        for key, value in body.items():
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not (value is None and key == "sample_period") and not (number and value >= 0):
                raise errors.invalid_argument(
                    f"'{key}' must be seconds >= 0" + (" or null" if key == "sample_period" else "")
                )
        with self._lock:
            self.settings.update({k: None if v is None else float(v) for k, v in body.items()})
            self._wake.notify_all()
            return dict(self.settings)

    # -- the sampler ---------------------------------------------------------------------
    def start(self) -> Monitoring:
        self._thread = threading.Thread(
            target=self._run, name="tpuctl-emulator-monitoring", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
            self._wake.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _run(self) -> None:
        while True:
            with self._lock:
                period = self.settings["sample_period"]
                self._wake.wait(timeout=period if period else None)
                if self._stopping:
                    return
                due = self.settings["sample_period"] is not None
            if due:
                self.sample()

    def sample(self) -> dict[str, Any]:
        """Sample every worker now; returns how many workers and points."""
        workers = self._workers()
        now = self._clock()
        processes = _processes_by_marker({w.marker for w in workers})
        recorded = 0
        with self._lock:
            for w in workers:
                recorded += self._sample_worker(w, now, processes.get(w.marker, {}))
            self._expire(now)
        return {"workers": len(workers), "points": recorded, "at": _rfc3339(now)}

    def _sample_worker(self, w: WorkerView, now: float, procs: dict[int, tuple[int, int]]) -> int:
        mtimes: list[float] = []
        shares: list[float | None] = []  # None: nothing written (an empty device file)
        for device in w.devices:
            try:
                stat = device.stat()
            except OSError:
                stat = None
            mtimes.append(stat.st_mtime if stat else now)
            shares.append(_declared_share(device) if stat and stat.st_size else None)
        seen = self._seen.get((w.uid, w.worker))
        window = now - (self.settings["sample_period"] or DEFAULTS["sample_period"] or 60.0)
        rtype, resource = w.resource
        points: list[tuple[str, tuple[tuple[str, str], ...], float]] = []
        busy_shares = []
        for chip, (mtime, share) in enumerate(zip(mtimes, shares, strict=True)):
            if seen is None or chip >= len(seen.mtimes):
                # first look at the worker: written within the last sample period
                busy = share is not None and mtime > window
            else:
                busy = mtime > seen.mtimes[chip]
            value = (share or 100.0) if busy else 0.0
            busy_shares.append(value)
            chip_label = (("accelerator_id", str(chip)),)
            points.append((IDLE, chip_label, 0.0 if busy else max(0.0, now - mtime)))
            points.append((DUTY, chip_label, value))
            points.append((TENSORCORE, chip_label, value))
            if chip < len(w.hbm):
                points.append((HBM_USED, chip_label, float(w.hbm[chip][0])))
                points.append((HBM_TOTAL, chip_label, float(w.hbm[chip][1])))
        points.append((MXU, (), sum(busy_shares) / max(1, len(busy_shares))))
        ticks = {pid: t for pid, (t, _) in procs.items()}
        cpu = 0.0
        if seen is not None and now > seen.at:
            used = sum(t - seen.cpu_ticks.get(pid, t) for pid, t in ticks.items())
            cpu = 100.0 * used / _CLK / (now - seen.at) / (os.cpu_count() or 1)
        points.append((CPU, (), max(0.0, cpu)))
        points.append((MEMORY, (), float(sum(rss for _, rss in procs.values()))))
        for metric, labels, value in points:
            self._points.setdefault((metric, rtype, resource, labels), []).append((now, value))
        self._seen[(w.uid, w.worker)] = _Seen(now, mtimes, ticks)
        return len(points)

    def _expire(self, now: float) -> None:
        for key, points in list(self._points.items()):
            cut = bisect.bisect_left(points, (now - RETENTION, float("-inf")))
            if cut:
                del points[:cut]
            if not points:
                del self._points[key]

    # -- projects.timeSeries.list ----------------------------------------------------
    def list_time_series(self, project: str, query: dict[str, str]) -> dict[str, Any]:
        request = _parse_request(query)
        terms = parse_filter(query.get("filter", ""))
        metric = terms.pop("metric.type")[0]
        now = self._clock()
        with self._lock:
            delay = self.settings["ingestion_delay"] or 0.0
            visible_until = min(request.end, now - delay)
            matched = []
            for (mtype, rtype, resource, labels), points in sorted(self._points.items()):
                if mtype != metric or dict(resource).get("project_id") != project:
                    continue
                fields = {f"resource.labels.{k}": v for k, v in resource}
                fields.update({f"metric.labels.{k}": v for k, v in labels})
                fields["resource.type"] = rtype
                if all(fields.get(k) in allowed for k, allowed in terms.items()):
                    lo = bisect.bisect_left(points, (request.start, float("-inf")))
                    if request.start == request.end:
                        lo = bisect.bisect_left(points, (request.start - 1e-9, float("-inf")))
                    hi = bisect.bisect_right(points, (visible_until, float("inf")))
                    chosen = points[lo:hi]
                    if chosen:
                        matched.append((rtype, resource, labels, chosen))
        kind, value_type, unit, _ = METRICS[metric]
        series = []
        for rtype, resource, labels, chosen in matched:
            aligned = request.align(chosen)
            out_type = "DOUBLE" if request.aligner == "ALIGN_MEAN" else value_type
            series.append(
                {
                    "metric": {"type": metric, **({"labels": dict(labels)} if labels else {})},
                    "resource": {"type": rtype, "labels": dict(resource)},
                    "metricKind": kind,
                    "valueType": out_type,
                    "unit": unit,
                    "points": [_point(t, v, out_type) for t, v in reversed(aligned)],
                }
            )
        return _page(series, request, unit)

    # -- projects.metricDescriptors.list ---------------------------------------------
    def list_metric_descriptors(self, project: str, query: dict[str, str]) -> dict[str, Any]:
        """The TPU metrics' descriptors, with the monitored resources they are written on
        (`metric.type = "T"` or `metric.type = starts_with("P")`; no filter: all)."""
        return descriptors(project, query.get("filter", ""))


# -- the request ---------------------------------------------------------------------------
def worker_views(nodes: Any, files: Any, chips: Any) -> list[WorkerView]:
    """Every worker of every READY node (`nodes`: Node objects; `files`: WorkerFiles;
    `chips`: the workers' Chips, workers/chips.py)."""
    return [
        _view(n, k, files, chips)
        for n in nodes
        if n.state == "READY"
        for k in range(len(n.addresses))
    ]


def compute_worker_views(hosts: Any, files: Any, chips: Any) -> list[WorkerView]:
    """Every running VM of every Compute Engine TPU VM or slice (`hosts`: ComputeHost
    objects, compute/hosts.py), in worker order, by its instance id."""
    return [_view(h, k, files, chips, h.vms[k].uid) for h in hosts for k in h.serving()]


def _view(n: Any, k: int, files: Any, chips: Any, instance_id: str = "") -> WorkerView:
    devices = tuple(files.devices(n, k))
    marker = files.marker(n, k)
    hbm = chips.memory(marker, n.accelerator.generation, len(devices))
    return WorkerView(n.project, n.zone, n.node_id, n.uid, k, marker, devices, instance_id, hbm)


def _declared_share(device: Path) -> float:
    """The percent the last line written declares (0-100), else 100."""
    try:
        with open(device, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - 64))
            tail = f.read().decode(errors="replace").strip().splitlines()
        return min(100.0, max(0.0, float(tail[-1]))) if tail else 100.0
    except (OSError, ValueError):
        return 100.0


def _processes_by_marker(markers: set[str]) -> dict[str, dict[int, tuple[int, int]]]:
    """For each worker marker: its processes' pid -> (CPU ticks used, resident bytes)."""
    found: dict[str, dict[int, tuple[int, int]]] = {}
    if not markers or not os.path.isdir("/proc"):
        return found
    prefix = b"TPUCTL_EMULATOR_WORKER="
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read()
            marker = next(
                (v[len(prefix) :].decode() for v in environ.split(b"\0") if v.startswith(prefix)),
                None,
            )
            if marker not in markers:
                continue
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            with open(f"/proc/{entry}/statm", "rb") as f:
                rss = int(f.read().split()[1]) * _PAGE
        except (OSError, ValueError, IndexError):
            continue
        assert marker is not None
        found.setdefault(marker, {})[int(entry)] = (int(fields[11]) + int(fields[12]), rss)
    return found
