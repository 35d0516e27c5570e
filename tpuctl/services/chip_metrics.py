"""A running job's chips from Cloud Monitoring, where its agents could not read libtpu
(services/chips.py): per worker and chip the newest point of the duty cycle, the
TensorCore utilisation and the HBM used and held (`tpu.googleapis.com/accelerator/*`,
metric label `accelerator_id`; docs/observability.md, "Chips").

Which monitored resource holds a worker's series, and which of its labels says which
worker it is, is the API's (`TpuBackend.monitored_workers`: `tpu_worker` on the Cloud TPU
API, `gce_instance` on Compute Engine). One `timeSeries.list` per metric and resource,
all at once, with a filter naming the job's node(s) and workers: a list names one metric
type. Points arrive minutes late (sampled every 60 s, visible up to 180 s later), so each
figure carries the age of its point. Metrics are worth having, never worth failing for:
what cannot be read is one line of why.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tpuctl.errors import TpuctlError

if TYPE_CHECKING:
    from tpuctl.cloud.backend import MonitoredWorkers, TpuBackend
    from tpuctl.cloud.monitoring import MonitoringApi, Series

SOURCE = "monitoring"
LOOKBACK_MINUTES = 10  # a newer point than this is what the per-chip table shows


def lacking(chips: list[dict[str, Any]]) -> list[int]:
    """The running workers whose agent reported no chip from libtpu (services/chips.py)."""
    return [w["worker"] for w in chips if w["source"] != SOURCE and not w["chips"]]


@dataclass
class Found:
    """What Monitoring gave: per worker, its chips' figures; or why it gave nothing."""

    workers: list[dict[str, Any]] = field(default_factory=list)  # as job_chips' entries
    note: str | None = None


def read(
    backends: Callable[[], Sequence[TpuBackend]],
    monitoring: Callable[[], MonitoringApi],
    record: dict[str, Any],
    workers: list[int],
    now: float | None = None,
) -> Found:
    """The chips of the job's `workers` (its record: project, zone, node, workers,
    slices) from Cloud Monitoring, one entry per worker that has points; `backends()`
    makes the APIs' adapters, asked where the nodes' series are."""
    at = time.time() if now is None else now
    if not workers:
        return Found()
    try:
        where = _resources(backends(), record, workers)
        series = _series(monitoring(), str(record.get("project") or ""), where, at)
    except TpuctlError as e:
        return Found(note=str(e))
    return Found(_fold(series, at))


def _resources(
    backends: Sequence[TpuBackend], record: dict[str, Any], workers: list[int]
) -> list[MonitoredWorkers]:
    """Where the series of the job's `workers` are, one entry per resource type (and
    project, where an API keeps them in another): each of its nodes' adapters says, and
    the nodes' answers are merged."""
    from tpuctl.cloud.backend import MonitoredWorkers
    from tpuctl.services.lookup import find_node

    node, zone = str(record.get("node") or ""), str(record.get("zone") or "")
    slices = int(record.get("slices", 1))
    per = max(1, int(record.get("workers", 1)) // max(1, slices))
    parent = f"projects/{record.get('project')}/locations/{zone}/nodes"
    by_resource: dict[tuple[str, str], MonitoredWorkers] = {}
    for s in sorted({w // per for w in workers}):
        # worker numbers come from the bucket's statuses: one past the record's slices
        # names a node that is not there (NotFoundError), never an index out of range
        name = node if slices <= 1 else f"{node}-{s}"
        api, found = find_node(backends, f"{parent}/{name}")
        mine = [w % per for w in workers if w // per == s]
        m = api.monitored_workers(found, mine)
        known = {k: s * per + w for k, w in m.workers.items()}  # the job's worker numbers
        if not known:
            continue
        had = by_resource.get((m.resource, m.project))
        if had is not None:
            labels = {k: tuple({*had.labels.get(k, ()), *v}) for k, v in m.labels.items()}
            known = {**had.workers, **known}
        else:
            labels = dict(m.labels)
        by_resource[m.resource, m.project] = MonitoredWorkers(
            m.resource, labels, m.keys, known, m.project
        )
    return list(by_resource.values())


def _metrics() -> dict[str, tuple[str, bool]]:
    """Each metric read -> its figure's name in a chip's entry, and whether it is bytes."""
    from tpuctl.cloud.monitoring import DUTY, MEMORY_TOTAL, MEMORY_USED, TENSORCORE

    return {
        DUTY: ("dutyCycle", False),
        TENSORCORE: ("tensorcoreUtilization", False),
        MEMORY_USED: ("hbmUsed", True),
        MEMORY_TOTAL: ("hbmTotal", True),
    }


Call = tuple[str, "MonitoredWorkers"]


def _series(
    api: MonitoringApi, project: str, where: list[MonitoredWorkers], now: float
) -> list[tuple[Call, list[Series]]]:
    calls: list[Call] = [(metric, m) for m in where for metric in _metrics()]
    if not calls:
        return []

    def one(c: Call) -> list[Series]:
        return api.series(
            c[1].project or project,
            c[0],
            resource=c[1].resource,
            labels=c[1].labels,
            minutes=LOOKBACK_MINUTES,
            now=now,
        )

    with ThreadPoolExecutor(max_workers=min(8, len(calls))) as pool:
        return list(zip(calls, pool.map(one, calls), strict=True))


def _fold(found: list[tuple[Call, list[Series]]], now: float) -> list[dict[str, Any]]:
    """Each worker's chips: the newest point of each figure (None: it has none), and the
    time of the newest point the worker has."""
    names = _metrics()
    chips: dict[int, dict[int, dict[str, Any]]] = {}
    newest: dict[int, float] = {}
    for (metric, m), series in found:
        for s in series:
            worker = m.workers.get(tuple(s.resource.get(k, "") for k in m.keys))
            chip = s.labels.get("accelerator_id", "")
            if worker is None or not chip.isdigit() or not s.points:
                continue
            at, value = s.points[0]  # newest first
            row = chips.setdefault(worker, {}).setdefault(int(chip), _blank(int(chip)))
            name, in_bytes = names[metric]
            row[name] = int(value) if in_bytes else value
            newest[worker] = max(newest.get(worker, at), at)
    return [
        {
            "worker": w,
            "source": SOURCE,
            "address": "",
            "at": newest[w],
            "age": round(max(0.0, now - newest[w]), 1),
            "error": None,
            "chips": [chips[w][c] for c in sorted(chips[w])],
        }
        for w in sorted(chips)
    ]


def _blank(chip: int) -> dict[str, Any]:
    return {"chip": chip, **{name: None for name, _ in _metrics().values()}}


def merged(chips: list[dict[str, Any]], found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The libtpu entries with Monitoring's after each worker's own (by worker)."""
    by_worker: dict[int, list[dict[str, Any]]] = {}
    for w in found:
        by_worker.setdefault(w["worker"], []).append(w)
    out = []
    for w in chips:
        out.append(w)
        out += by_worker.pop(w["worker"], [])
    return out + [w for rest in by_worker.values() for w in rest]


def add_to(
    row: dict[str, Any],
    record: dict[str, Any],
    backends: Callable[[], Sequence[TpuBackend]],
    monitoring: Callable[[], MonitoringApi],
) -> None:
    """A job's row (`tpuctl jobs JOB`) with Monitoring's chips beside libtpu's, for its
    running workers whose agent read none; `chipsNote`: why Monitoring gave none."""
    found = read(backends, monitoring, record, lacking(row["chips"]))
    row["chips"] = merged(row["chips"], found.workers)
    row["chipsNote"] = found.note
