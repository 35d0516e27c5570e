"""What each node's TPUs are doing, from Cloud Monitoring (docs/metrics.md): per node and
worker the latest TensorCore utilisation, the TensorCore idle duration, and a short history
for a sparkline.

One read covers a whole project: a list call per metric (and per zone when told zones),
run concurrently, so many nodes cost no more round trips than one.

Where a TPU VM writes its metrics is asked, not assumed: a Cloud TPU API node's workers
write them on the `tpu_worker` resource (node_id, worker_id), and Google's pages do not
say which resource a Compute Engine TPU VM's are on (https://docs.cloud.google.com/tpu/docs/monitor-tpu
says only that Compute Engine VMs and the TPU runtime generate them). So the metric's
descriptor (`metricDescriptors.list`) names the resources it is written on, and each is
read; a read keeps each worker's series by the monitored resource they are on, and which
of those are a node's workers is its API's to say (`TpuBackend.monitored_workers`: its
`tpu_worker` series by node id on the Cloud TPU API, its VMs' `gce_instance` series by
instance id on Compute Engine; `for_node`). Metrics arrive late
(sampled every 60 s, visible up to 180 s after): a worker whose newest idle point is older
than `STALE` seconds, or that has none, has no fresh evidence (`idle_seconds` None).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tpuctl.durations import format_duration
from tpuctl.errors import ServiceDisabledError, TpuctlError
from tpuctl.models import Node

if TYPE_CHECKING:
    from tpuctl.cloud.backend import MonitoredWorkers, TpuBackend
    from tpuctl.cloud.monitoring import MonitoringApi, Series
    from tpuctl.services.gc import MetricsCheck
    from tpuctl.services.idle import Busy

HISTORY_MINUTES = 15
# sampled every 60 s, visible up to 180 s later: a point older than this is not news
STALE = 60 + 180 + 60


@dataclass
class WorkerMetrics:
    util: float | None = None  # percent, the newest aligned minute
    idle_seconds: float | None = None  # every TensorCore idle at least this long (newest point)
    idle_at: float | None = None  # when that point was sampled
    history: list[float] = field(default_factory=list)  # percent per minute, oldest first
    chips: int = 0  # how many chips' utilisation the history averages


@dataclass
class NodeMetrics:
    zone: str
    node_id: str
    workers: dict[int, WorkerMetrics] = field(default_factory=dict)

    @property
    def util(self) -> float | None:
        values = [w.util for w in self.workers.values() if w.util is not None]
        return sum(values) / len(values) if values else None

    @property
    def history(self) -> list[float]:
        rows = [w.history for w in self.workers.values() if w.history]
        if not rows:
            return []
        width = min(len(r) for r in rows)
        return [sum(r[len(r) - width + i] for r in rows) / len(rows) for i in range(width)]

    @property
    def sampled_at(self) -> float | None:
        """When the oldest of the workers' newest idle points was sampled."""
        times = [w.idle_at for w in self.workers.values() if w.idle_at is not None]
        return min(times) if times else None

    def idle_seconds(self, workers: int | None = None, now: float | None = None) -> float | None:
        """How long every TensorCore of every worker has been idle, from fresh points only;
        None when a worker (of `workers`, if known) has no fresh point."""
        at = time.time() if now is None else now
        values = []
        for w in self.workers.values():
            if w.idle_seconds is None or w.idle_at is None or at - w.idle_at > STALE:
                return None
            values.append(w.idle_seconds)
        if not values or (workers is not None and len(values) < workers):
            return None
        return min(values)


Resource = tuple[str, tuple[tuple[str, str], ...]]  # a monitored resource: type, labels


@dataclass
class Seen:
    """Every worker's metrics a read found, by the monitored resource its series are on
    (one worker each: a TPU API worker's `tpu_worker`, a VM's `gce_instance`)."""

    workers: dict[Resource, WorkerMetrics] = field(default_factory=dict)
    _index: dict[Any, dict[tuple[str, ...], list[Any]]] = field(default_factory=dict)

    def find(self, where: MonitoredWorkers) -> dict[int, WorkerMetrics]:
        """The workers `where` names, by their number in the node."""
        index = self._index.get((where.resource, where.keys))
        if index is None:  # once per kind of resource and keys, not once per node
            index = {}
            for (kind, labels), w in self.workers.items():
                if kind == where.resource:
                    got = dict(labels)
                    index.setdefault(tuple(got.get(k, "") for k in where.keys), []).append((got, w))
            self._index[(where.resource, where.keys)] = index
        return {
            number: w
            for values, number in where.workers.items()
            for got, w in index.get(values, [])
            if all(got.get(k) in allowed for k, allowed in where.labels.items())
        }


def _resources(api: MonitoringApi, project: str) -> list[str]:
    """The monitored resources the TPU metrics are written on; the TPU API's when the
    descriptor names none."""
    from tpuctl.cloud.monitoring import IDLE, RESOURCE

    return api.resource_types(project, IDLE) or [RESOURCE]


def read(
    api: MonitoringApi,
    project: str,
    zones: Iterable[str] | None = None,
    *,
    minutes: float = HISTORY_MINUTES,
    history: bool = True,
    now: float | None = None,
) -> Seen:
    """Every TPU worker's metrics in `project` (in `zones`, else every zone), by the
    monitored resource its series are on."""
    from tpuctl.cloud import registry
    from tpuctl.cloud.monitoring import IDLE, TENSORCORE

    at = time.time() if now is None else now
    where: list[str | None] = [*sorted(set(zones))] if zones is not None else [None]

    Call = tuple[str, str | None, str | None, str]  # metric, zone, aligner, resource

    def calls_on(kinds: Iterable[str]) -> list[Call]:
        out: list[Call] = [(IDLE, z, None, r) for z in where for r in kinds]
        if history:
            out += [(TENSORCORE, z, "ALIGN_MEAN", r) for z in where for r in kinds]
        return out

    def one(c: Call) -> list[Series]:
        return api.series(
            project, c[0], resource=c[3], zone=c[1], minutes=minutes, aligner=c[2], now=at
        )

    # The resources the descriptor names are asked at the same time as the series of the
    # ones the registry's APIs write them on (`BackendKind.metrics_resource`: one round
    # trip, not two); a resource it names beyond those is read after, and a series of one
    # it does not name is dropped.
    guessed = list(dict.fromkeys(k.metrics_resource for k in registry.KINDS if k.metrics_resource))
    calls = calls_on(guessed)
    with ThreadPoolExecutor(max_workers=min(16, len(calls) + 1)) as pool:
        kinds_asked = pool.submit(_resources, api, project)
        results = list(pool.map(one, calls))
        kinds = kinds_asked.result()
    more = calls_on([k for k in kinds if k not in guessed])
    if more:
        with ThreadPoolExecutor(max_workers=min(16, len(more))) as pool:
            results += list(pool.map(one, more))
    calls += more
    kept = [(c, r) for c, r in zip(calls, results, strict=True) if c[3] in kinds]
    calls, results = [c for c, _ in kept], [r for _, r in kept]
    seen = Seen()
    for (metric, _, _, resource), found in zip(calls, results, strict=True):
        for s in found:
            key = (resource, tuple(sorted(s.resource.items())))
            _merge(seen.workers.setdefault(key, WorkerMetrics()), s, metric == IDLE)
    return seen


def where(backends: Sequence[TpuBackend], node: Node) -> MonitoredWorkers:
    """Where the series of `node`'s workers are, as the API that holds it says."""
    from tpuctl.cloud import registry

    numbers = [w.index for w in node.workers] or [0]  # a node listed without its workers
    return registry.holder(backends, node).monitored_workers(node, numbers)


def for_node(seen: Seen, node: Node, at: MonitoredWorkers) -> NodeMetrics | None:
    """The node's metrics: the series of its workers `at` names, each as the worker it
    is (None: none found)."""
    found = seen.find(at)
    return NodeMetrics(node.zone, node.name, found) if found else None


class Reads:
    """Metrics read once per project, when first needed: the target's, and another that
    an API keeps a node's series in (`MonitoredWorkers.project`)."""

    def __init__(self, load: Callable[[str], Seen], project: str) -> None:
        self.load, self.project, self.seen = load, project, dict[str, Seen]()

    def of(self, node: Node, at: MonitoredWorkers) -> NodeMetrics | None:
        project = at.project or node.project or self.project
        if project not in self.seen:
            self.seen[project] = self.load(project)
        return for_node(self.seen[project], node, at)


def _merge(w: WorkerMetrics, s: Series, idle: bool) -> None:
    """Fold one chip's series into its worker: the least idle chip, the mean utilisation."""
    if not s.points:
        return
    if idle:
        at, value = s.points[0]
        if w.idle_seconds is None or value < w.idle_seconds:
            w.idle_seconds, w.idle_at = value, at
        elif w.idle_at is not None and at < w.idle_at:
            w.idle_at = at
        return
    values = [v for _, v in reversed(s.points)]
    n = w.chips
    if n:
        width = min(len(values), len(w.history))
        values = [(w.history[i - width] * n + values[i - width]) / (n + 1) for i in range(width)]
    w.history, w.util, w.chips = values, values[-1], n + 1


def safe_read(
    api: Callable[[], MonitoringApi], project: str, zones: Iterable[str] | None = None, **kw: Any
) -> tuple[Seen, str | None]:
    """`read` with the adapter `api()` makes, or nothing and why (metrics are worth having,
    never worth failing for)."""
    from tpuctl.errors import TpuctlError

    try:
        return read(api(), project, zones, **kw), None
    except TpuctlError as e:
        return Seen(), str(e)


def idle_check(
    load: Callable[[str], Seen], backends: Sequence[TpuBackend], now: float | None = None
) -> MetricsCheck:
    """gc's metrics check, over metrics `load`ed once per project, when first needed (a
    node's workers found as its API says, `where`): idle when every
    TensorCore of every worker has been idle for the limit; active when one was busy more
    recently; None when a worker has no fresh point (the caller falls back on its probe).

    A point older than the limit is no evidence either way (the node may have been idle,
    or busy, for all of the limit since): None, so the node is probed as one with no
    point. A worker idle when sampled counts as idle since then too (its idle time at
    the point plus the point's age): nothing newer says otherwise."""
    reads = Reads(load, "")

    def check(node: Node, limit: float) -> tuple[Busy, str] | None:
        m = reads.of(node, where(backends, node))
        sampled = m.idle_seconds(len(node.workers) or None, now) if m else None
        if sampled is None:
            return None
        assert m is not None
        at = time.time() if now is None else now
        ages = [max(0.0, at - (w.idle_at or at)) for w in m.workers.values()]
        if max(ages) > limit:
            return None
        idle = min(
            (w.idle_seconds or 0.0) + age if w.idle_seconds else 0.0
            for w, age in zip(m.workers.values(), ages, strict=True)
        )
        if idle >= limit:
            n, ago = len(m.workers), format_duration(max(ages))
            said = f"TensorCores idle for {format_duration(idle)} on its {n} worker(s)"
            if sampled < limit:  # idle long enough only with the point's age
                said += f" ({format_duration(sampled)} at the last sample, {ago} ago)"
            return "idle", said
        return "busy", _not_idle_long_enough(m, sampled, limit, now)

    return check


def _not_idle_long_enough(m: NodeMetrics, idle: float, limit: float, now: float | None) -> str:
    """What is known of a node idle for less than the limit: how long its TensorCores had
    been idle when last sampled, and how long ago that was (the value moves
    only with a new sample, every minute or so). Nothing more: the idle duration does not
    say whether, or when, they were ever busy before it."""
    at = time.time() if now is None else now
    ago = format_duration(max(0.0, at - (m.sampled_at or at)))
    return (
        f"TensorCores idle for {format_duration(idle)} at the last sample ({ago} ago), "
        f"under the limit of {format_duration(limit)}"
    )


@dataclass
class Row:
    """One node as `top` and `list` show it: the API's view joined with the metrics'."""

    node: Node
    metrics: NodeMetrics | None
    job_state: str | None = None  # the state of the job of its `tpuctl-job` label
    chips: list[dict[str, Any]] = field(default_factory=list)  # its job's, live (chips.py)

    @property
    def util(self) -> float | None:
        return self.metrics.util if self.metrics else None

    @property
    def idle_seconds(self) -> float | None:
        if self.metrics is None or self.node.state != "READY":
            return None
        return self.metrics.idle_seconds(len(self.node.workers) or None)

    def to_json(self, now: float | None = None) -> dict[str, Any]:
        from tpuctl.models import EXPIRES, JOB
        from tpuctl.services import cost

        at = time.time() if now is None else now
        expires = self.node.label_time(EXPIRES)
        return {
            "name": self.node.name,
            "zone": self.node.zone,
            "accelerator": self.node.accelerator_type,
            "state": self.node.state,
            "ageSeconds": self.node.age_seconds(at),
            "hourlyUsd": cost.node_hourly(self.node),
            "costSoFarUsd": cost.so_far(self.node),
            "utilization": self.util,
            "history": self.metrics.history if self.metrics else [],
            "idleSeconds": self.idle_seconds,
            "job": self.node.labels.get(JOB) or None,
            "jobState": self.job_state,
            "chips": self.chips,
            "ttlLeftSeconds": None if expires is None else expires - at,
            "owner": self.node.owner or None,
            "upcomingMaintenance": (
                self.node.maintenance.to_json() if self.node.maintenance else None
            ),
        }


@dataclass
class Snapshot:
    rows: list[Row]
    metrics_error: str | None = None  # why there are no metrics, if there are none
    skipped: list[str] = field(default_factory=list)  # an API that could not be listed


def snapshot(
    backends: Sequence[TpuBackend],
    monitoring: Callable[[], MonitoringApi],
    project: str,
    zone: str | None,
    job_states: Callable[[list[str]], dict[str, str]] | None = None,
    job_chips: Callable[[str], list[dict[str, Any]]] | None = None,
) -> Snapshot:
    """Every node of `project` (or of one zone) with its metrics: the node list and the
    metrics read concurrently, so the metrics add at most one round trip of latency. With
    `job_states`, the states of the nodes' jobs (`tpuctl-job` label) are read once the
    list is in, while the metrics are still coming; with `job_chips`, a running job's
    chips as its workers last read them (services/chips.py). Every backend's nodes are listed at
    the same time; one that is off in the project lists none (only the first backend's
    error is the command's), another failure is said in `skipped`."""
    from tpuctl.models import JOB

    parent = f"projects/{project}/locations/{zone or '-'}"
    zones = [zone] if zone and zone != "-" else None
    states: dict[str, str] = {}
    skipped: list[str] = []

    def other(api: TpuBackend) -> list[Node]:
        try:
            return api.list_nodes(parent)
        except ServiceDisabledError:
            return []  # a project that uses one API only
        except TpuctlError as e:
            skipped.append(f"could not list the TPU VMs of {api.kind.called}: {e}")
            return []

    from tpuctl.cloud import registry

    tpu = registry.requests_api(backends)
    others = [b for b in backends if b is not tpu]
    with ThreadPoolExecutor(max_workers=2 + len(others)) as pool:
        nodes = pool.submit(tpu.list_nodes, parent)
        more = [pool.submit(other, api) for api in others]
        found = pool.submit(lambda: safe_read(monitoring, project, zones))
        listed = nodes.result()  # its error, if any, is the one to tell
        listed += [n for f in more for n in f.result()]
        jobs = [n.labels[JOB] for n in listed if n.labels.get(JOB)]
        if job_states is not None and jobs:
            states = job_states(jobs)
        seen, why_not = found.result()
    located = [(n, where(backends, n)) for n in listed]
    reads = Reads(lambda p: safe_read(monitoring, p, zones)[0], project)
    reads.seen[project] = seen
    elsewhere = sorted({a.project for _, a in located if a.project and a.project != project})
    if elsewhere:  # an API that keeps its nodes' series in a project of its own: read at once
        with ThreadPoolExecutor(max_workers=min(8, len(elsewhere))) as pool:
            reads.seen.update(zip(elsewhere, pool.map(reads.load, elsewhere), strict=True))
    chips = job_chips or (lambda _: [])
    rows = [
        Row(n, reads.of(n, at), states.get(n.labels.get(JOB, "")), chips(n.labels.get(JOB, "")))
        for n, at in located
    ]
    return Snapshot(rows, why_not, skipped)
