"""What a job did with its TPUs, from Cloud Monitoring (docs/metrics.md, "Jobs"): the mean
TensorCore utilisation and the share of samples with the TensorCores idle, over the job's
lifetime (its first worker's start to its last worker's end, or now) on its node(s), and
whether it looks input-bound.

Many jobs cost one `timeSeries.list` (raw points of `tensorcore_utilization`, a filter
naming every node); a deleted node's series stay in Monitoring, so a torn-down job still
has its figures. Metrics are worth having, never worth failing for: when they cannot be
read, every job gets the same one-line note.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tpuctl.models import slice_ids

if TYPE_CHECKING:
    from tpuctl.cloud.monitoring import MonitoringApi, Series

# Below this mean TensorCore utilisation while it ran, a job "looks input-bound": the
# TensorCores waited more than half the time. TensorFlow's profiler already calls a step
# HIGHLY input-bound at 20% of its time waiting for input; utilisation also drops for
# other reasons (host-side steps, checkpoints, compilation), so tpuctl speaks only well
# past that line. docs/metrics.md, "Is it input-bound?".
INPUT_BOUND = 50.0
IDLE_BELOW = 1.0  # percent: a sample this low counts as the TensorCores idle
LOOKBACK = 7 * 24 * 3600.0  # older jobs are not looked up (their points cost a lot to read)
NO_METRICS_YET = "no metrics yet"
NO_SAMPLES = "no samples in the job's window"
# A point is sampled every 60 s and visible up to 180 s after (docs/metrics.md): once a
# job has ended this long ago, every point of its window that will ever be read is there.
INGESTED_AFTER = 180.0
MAX_NAMED = 100  # nodes named in one filter's one_of(...), at most


@dataclass(frozen=True)
class Window:
    """Where and when a job ran: its node(s) in a zone, from `start` to `end` (None: now)."""

    zone: str
    nodes: tuple[str, ...]
    start: float
    end: float | None = None


@dataclass
class Usage:
    """A job's TensorCores over its lifetime; `note` says why there are no figures."""

    util: float | None = None  # percent, the mean of every chip's samples
    idle_share: float | None = None  # 0..1, the samples with the TensorCores idle
    samples: int = 0
    note: str | None = None
    values: list[float] = field(default_factory=list, repr=False)

    @property
    def input_bound(self) -> bool:
        return self.util is not None and self.util < INPUT_BOUND

    def to_json(self) -> dict[str, Any]:
        return {
            "utilization": None if self.util is None else round(self.util, 1),
            "idleShare": None if self.idle_share is None else round(self.idle_share, 3),
            "inputBound": self.input_bound if self.util is not None else None,
            "metricsNote": self.note,
        }

    def describe(self) -> str:
        """One sentence for the end of `tpuctl run`."""
        if self.util is None:
            return f"TensorCore use: {self.note or NO_METRICS_YET}"
        text = (
            f"TensorCores {self.util:.0f}% busy on average, idle in "
            f"{self.idle_share or 0.0:.0%} of {self.samples} sample(s)"
        )
        if self.input_bound:
            text += (
                f"; looks input-bound (below {INPUT_BOUND:.0f}%): the TPU waits for data, "
                "see docs/metrics.md"
            )
        return text

    def add(self, value: float) -> None:
        self.values.append(value)
        self.samples = len(self.values)
        self.util = sum(self.values) / self.samples
        self.idle_share = sum(1 for v in self.values if v < IDLE_BELOW) / self.samples


def job_usage(
    api: Callable[[], MonitoringApi],
    project: str,
    windows: dict[str, Window],
    now: float | None = None,
) -> dict[str, Usage]:
    """Every job's usage (by job id), from one list call covering all their nodes."""
    from tpuctl.cloud.monitoring import TENSORCORE
    from tpuctl.errors import TpuctlError

    at = time.time() if now is None else now
    wanted = {j: w for j, w in windows.items() if (w.end or at) >= at - LOOKBACK}
    out = {j: Usage(note="older than the metrics tpuctl reads") for j in windows}
    if not wanted:
        return out
    nodes: list[str] | None = sorted({n for w in wanted.values() for n in w.nodes})
    if nodes and len(nodes) > MAX_NAMED:
        nodes = None  # a filter has a length limit: read every TPU worker's series instead
    start = max(at - LOOKBACK, min(w.start for w in wanted.values()))
    try:
        found = api().series(project, TENSORCORE, nodes=nodes, start=start, now=at)
    except TpuctlError as e:
        note = f"metrics unavailable: {e}"
        return {j: Usage(note=note) for j in windows}
    for job_id, w in wanted.items():
        out[job_id] = fold(found, w, at)
    return out


def fold(found: Iterable[Series], w: Window, now: float) -> Usage:
    """One job's usage from the series of its nodes, inside its window."""
    usage = Usage()
    end = now if w.end is None else w.end
    for s in found:
        if s.node_id not in w.nodes or s.zone != w.zone:
            continue
        for at, value in s.points:
            if w.start <= at <= end:
                usage.add(value)
    if not usage.samples:
        final = w.end is not None and now - w.end > INGESTED_AFTER
        usage.note = NO_SAMPLES if final else NO_METRICS_YET
    return usage


def for_job(
    statuses: Callable[[], dict[int, dict[str, Any]]],
    api: Callable[[], MonitoringApi],
    project: str,
    zone: str,
    nodes: list[str],
    since: float,
) -> Usage:
    """One job's usage at the end of `tpuctl run`: its workers' `statuses` (started,
    ended) and its nodes' series (since `since`, before the job began) read concurrently."""
    from tpuctl.cloud.monitoring import TENSORCORE
    from tpuctl.errors import TpuctlError

    now = time.time()
    with ThreadPoolExecutor(max_workers=2) as pool:
        st = pool.submit(statuses)
        found = pool.submit(
            lambda: api().series(project, TENSORCORE, nodes=nodes, start=since, now=now)
        )
        try:
            series = found.result()
        except TpuctlError as e:
            return Usage(note=f"metrics unavailable: {e}")
        try:
            workers = list(st.result().values())
        except TpuctlError:
            workers = []
    record = {"node": nodes[0], "zone": zone, "created_unix": since, "workers": len(workers)}
    w = window(record, workers)
    assert w is not None
    return fold(series, Window(zone, tuple(nodes), w.start, w.end), now)


def window(record: dict[str, Any], statuses: Iterable[dict[str, Any]]) -> Window | None:
    """A job's window from its record (node, slices, zone, creation) and its workers'
    statuses (started, ended: the window closes only when every worker has ended)."""
    node = str(record.get("node") or "")
    if not node:
        return None
    slices = int(record.get("slices", 1))
    nodes = tuple(slice_ids(node, slices))
    st = list(statuses)
    starts = [float(s["started"]) for s in st if s.get("started")]
    start = min(starts) if starts else float(record.get("created_unix") or 0.0)
    ended = [float(s["ended"]) for s in st if s.get("ended")]
    done = st and len(ended) == len(st) >= int(record.get("workers", 1))
    end = max(ended) if done else None
    return Window(str(record.get("zone") or ""), nodes, start, end)
