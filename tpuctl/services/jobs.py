"""Jobs as the bucket records them: list, read logs, cancel. No local state. Where the
objects are, what the states mean and how a status is changed are the job protocol's
(tpuctl/agent/protocol.py), which the agents on the workers follow too."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from tpuctl.agent import protocol
from tpuctl.agent.protocol import FINAL, overall
from tpuctl.concurrency import each
from tpuctl.errors import (
    NotFoundError,
    PreconditionFailedError,
    TpuctlError,
    UnreadableObjectError,
    UsageError,
)
from tpuctl.services import records
from tpuctl.services.chips import job_chips
from tpuctl.services.run.spec import worker_label

if TYPE_CHECKING:
    from tpuctl.cloud.monitoring import MonitoringApi
    from tpuctl.cloud.storage import Bucket

T = TypeVar("T")
R = TypeVar("R")
READERS = 8  # objects read at once (the storage client's connection pool holds 10)
_STATUS_NAME = re.compile(r"worker-(\d+)\.json")  # protocol.status_path's last part
READ_BLOCK = 1 << 20  # a log is read this much at a time, whatever its size
FIRST_BLOCK = 64 << 10  # the least of a log's first block (read beside the other logs')


def _each(fn: Callable[[T], R], items: list[T]) -> list[R]:
    """`fn` of every item, READERS at a time, in order (tpuctl/concurrency.py: `run`'s
    watch reads the statuses in a thread a Ctrl-C leaves behind, and must not wait for a
    read being retried)."""
    return each(fn, items, READERS)


def mark_final(
    bucket: Bucket, job_id: str, workers: list[int], attempt: int, state: str, message: str
) -> None:
    """Record `state` for these workers where no final status of `attempt` is (the client
    ending a job its agents cannot: never started, lost). Also asks an agent that is only
    slow to stop (`cancel`)."""

    def change(worker: int) -> Callable[[Any], dict[str, Any]]:
        return lambda value: protocol.ended(value, worker, attempt, state, message)

    for worker in workers:
        bucket.update_json(protocol.status_path(job_id, worker), change(worker))


def _read_status(bucket: Bucket, name: str) -> dict[str, Any] | None:
    return records.read(bucket, name, records.STATUS, "worker's status")


def _status_or_none(bucket: Bucket, name: str) -> dict[str, Any] | None:
    """Worker k's status as its own object holds it, or None when that object is not a
    status (records.py: not JSON, too large, a field of the wrong type; or another
    worker's): the bucket is shared, and one object nobody should have written must not
    hide every job from `jobs`."""
    worker = _STATUS_NAME.fullmatch(name.rsplit("/", 1)[-1])
    if worker is None:
        return None
    value = _read_status(bucket, name)
    return value if value is not None and value.get("worker", 0) == int(worker.group(1)) else None


def job_state(
    bucket: Bucket, job_id: str, found: Iterable[dict[str, Any] | str], workers: int
) -> str:
    """The job's state from its workers' statuses (or their states), as `overall` says;
    a job no agent has reported on whose cancel marker is there is CANCELLED (killed
    before its agents started, then cancelled: no agent will ever say so)."""
    states = [str(s.get("state")) if isinstance(s, dict) else s for s in found]
    state = overall(states, workers)
    if state != protocol.PENDING:
        return state
    marker = records.read(bucket, protocol.cancel_path(job_id), records.ANY, "cancel mark")
    return protocol.CANCELLED if marker and protocol.cancel_marked(marker) else state


def interrupted(bucket: Bucket, job_id: str) -> bool:
    """Whether the job was cancelled by its own run's Ctrl-C (its cancel marker says so)."""
    marker = records.read(bucket, protocol.cancel_path(job_id), records.ANY, "cancel mark")
    return bool(protocol.cancel_marked(marker) and marker and marker.get("interrupted"))


def statuses(bucket: Bucket, job_id: str) -> dict[int, dict[str, Any]]:
    """Every status object of the job (one listing, then the objects read concurrently),
    by worker; an object that is not a worker's status is left out."""
    names = sorted(bucket.names(protocol.status_prefix(job_id)))
    found: dict[int, dict[str, Any]] = {}
    for value in _each(lambda name: _status_or_none(bucket, name), names):
        if value is not None:
            found[int(value.get("worker", 0))] = value
    return dict(sorted(found.items()))


def list_jobs(
    bucket: Bucket,
    monitoring: Callable[[], MonitoringApi] | None = None,
    project: str = "",
    job_ids: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Every job of the bucket (or those of `job_ids` it has); with `monitoring` (of
    `project`), each with its TensorCore use (services/usage.py: one metrics call for all
    of them)."""
    from tpuctl.services import usage
    from tpuctl.services.run.environment import summary

    rows = []
    windows: dict[str, usage.Window] = {}
    for job_id in records.list_job_ids(bucket) if job_ids is None else job_ids:
        try:
            record = records.read_job_record(bucket, job_id)
        except NotFoundError:
            continue
        except UnreadableObjectError as e:  # one job's record hides no other job
            records.note(protocol.job_record_path(job_id), e.message)
            continue
        st = statuses(bucket, job_id)
        state = job_state(bucket, job_id, st.values(), int(record.get("workers", 1)))
        exits = [s.get("exit_status") for _, s in sorted(st.items())]
        nonzero = [e for e in exits if e]
        if state == protocol.CANCELLED and interrupted(bucket, job_id):
            nonzero = [protocol.INTERRUPTED_EXIT]  # what its run exited with, as it said
        ended = [float(s["ended"]) for s in st.values() if s.get("ended")]
        started = record.get("created_unix")
        w = usage.window(record, st.values())
        if w is not None:
            windows[job_id] = w
        rows.append(
            {
                "id": job_id,
                "name": record.get("name", job_id),
                "node": record.get("node", ""),
                "state": state,
                "exitStatus": (
                    nonzero[0] if nonzero else (0 if exits and None not in exits else None)
                ),
                "created": record.get("created", ""),
                "duration": (max(ended) - started) if ended and started else None,
                "restarts": max((int(s.get("attempt", 1)) - 1 for s in st.values()), default=0),
                "workers": record.get("workers", 1),
                **({"image": record["image"]} if record.get("image") else {}),  # by digest
                **hung(st),
                "tpuUnhealthy": tpu_unhealthy(st),
                # the workers' statuses' (agent/envs.py): built, from the bucket, reused
                "environment": summary(st),
                "chips": job_chips(st),  # live, from each worker's libtpu (agent/chips.py)
            }
        )
    if monitoring is not None:
        found = usage.job_usage(monitoring, project, windows)
        for row in rows:
            row.update(found.get(row["id"], usage.Usage(note="no node recorded")).to_json())
    return rows


def tpu_unhealthy(st: dict[int, dict[str, Any]]) -> dict[str, Any] | None:
    """The first worker whose attempt ended on its TPU (agent/tpu_preflight.py: a status
    with `"reason": "tpu_unhealthy"`), with the evidence it gave; None without one."""
    for worker, s in st.items():
        if s.get("reason") == "tpu_unhealthy":
            return {"worker": worker, "evidence": str(s.get("evidence") or "")[:500]}
    return None


def hung(st: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Since when the job has looked hung (agent/hang.py: no output, CPU or chip work), by
    the earliest of its running workers that say so, and which workers say so."""
    found = {
        w: float(s["hung_since"])
        for w, s in st.items()
        if s.get("state") == protocol.RUNNING and isinstance(s.get("hung_since"), int | float)
    }
    return {"hungSince": min(found.values(), default=None), "hungWorkers": sorted(found)}


class JobStates:
    """Jobs' states as `tpuctl jobs` tells them ("?" when unreadable), for `top`
    refreshing: what never changes is read once (a job's worker count; a final state),
    and the workers' status objects of every job still running are read by name (no
    listing), READERS at a time: one request per worker and refresh."""

    def __init__(self, bucket: Bucket) -> None:
        self.bucket = bucket
        self.final: dict[str, str] = {}
        self.workers: dict[str, int] = {}
        self.live: dict[str, list[dict[str, Any]]] = {}  # running jobs' chips, as last read

    def __call__(self, job_ids: Iterable[str]) -> dict[str, str]:
        wanted = sorted(set(job_ids))
        todo = [j for j in wanted if j not in self.final]
        unknown = [j for j in todo if j not in self.workers]
        for job_id, count in zip(unknown, _each(self._worker_count, unknown), strict=True):
            if count is not None:
                self.workers[job_id] = count
        readable = [j for j in todo if j in self.workers]
        names = [(j, k) for j in readable for k in range(self.workers[j])]
        read = _each(lambda jk: self._status(*jk), names)
        states: dict[str, list[str]] = {j: [] for j in readable}
        seen: dict[str, dict[int, dict[str, Any]]] = {j: {} for j in readable}
        unreadable = set(todo) - set(readable)
        for (job_id, worker), value in zip(names, read, strict=True):
            if isinstance(value, TpuctlError):
                unreadable.add(job_id)
            elif value is not None:
                states[job_id].append(str(value.get("state")))
                seen[job_id][worker] = value
        self.live = {j: job_chips(st) for j, st in seen.items()}  # services/chips.py
        found = {
            j: "?" if j in unreadable else job_state(self.bucket, j, states[j], self.workers[j])
            for j in todo
        }
        self.final.update((j, s) for j, s in found.items() if s in FINAL)
        return {j: self.final.get(j) or found[j] for j in wanted}

    def _worker_count(self, job_id: str) -> int | None:
        try:
            return int(records.read_job_record(self.bucket, job_id).get("workers", 1))
        except TpuctlError:
            return None

    def _status(self, job_id: str, worker: int) -> dict[str, Any] | TpuctlError | None:
        try:
            return _read_status(self.bucket, protocol.status_path(job_id, worker))
        except TpuctlError as e:
            return e


def worker_names(bucket: Bucket, job_id: str) -> Callable[[int], str]:
    """How `tpuctl logs` names a worker of the job: `w3`, or `s1/w1` on a multislice job
    (its record's `slices`; worker numbers run across the slices)."""
    record = records.read_job_record(bucket, job_id)
    workers, slices = int(record.get("workers", 1)), int(record.get("slices", 1))
    return lambda w: worker_label(w, workers, slices)


class Logs(NamedTuple):
    """What `read_logs` found: the job's state, the new log bytes per worker (read as they
    are taken, in bounded memory), and the bytes left out before a tail, by worker."""

    state: str
    chunks: Iterator[tuple[int, bytes]]
    skipped: dict[int, int]


def read_logs(
    bucket: Bucket,
    job_id: str,
    offsets: dict[str, int],
    worker: int | None = None,
    tail: int | None = None,
) -> Logs:
    """New log bytes per worker since `offsets` (by log object: one per attempt and
    worker; updated as the chunks are taken), and the job's state. With `tail`, no more
    than the last `tail` bytes of each log are read."""
    record = records.read_job_record(bucket, job_id)
    st = statuses(bucket, job_id)
    if worker is not None and not 0 <= worker < int(record.get("workers", 1)):
        raise UsageError(f"job {job_id} has no worker {worker}")
    logs = [
        (w, str(s["log"]), offsets.get(str(s["log"]), 0))
        for w, s in st.items()
        if (worker is None or w == worker) and s.get("log")
    ]
    skipped: dict[int, int] = {}
    tails = log_tails(bucket, job_id, logs, tail, skipped)

    def chunks() -> Iterator[tuple[int, bytes]]:
        for w, log, start, data in tails:
            offsets[log] = start + len(data)
            yield w, data

    state = job_state(bucket, job_id, st.values(), int(record.get("workers", 1)))
    return Logs(state, chunks(), skipped)


def log_tails(
    bucket: Bucket,
    job_id: str,
    logs: list[tuple[int, str, int]],
    tail: int | None = None,
    skipped: dict[int, int] | None = None,
) -> Iterator[tuple[int, str, int, bytes]]:
    """What each (worker, log object, offset) has past its offset, as (worker, log, where
    the bytes start, bytes), log after log: the job's logs listed once (their sizes), then
    only those that grew read, from the offset on, by ranged reads. The first block of
    every grown log is read concurrently (a poll costs about the bytes that are new), the
    rest of a log block by block as it is taken, so memory holds a few MiB whatever the
    logs' sizes (a log object is as large as whoever wrote it made it). With `tail`, a log
    is read from no earlier than `tail` bytes before its end (the bytes left out are
    added to `skipped`). The listing is made at once, the reads as the result is taken."""
    if not logs:
        return iter(())
    sizes = {o.name: o.size for o in bucket.objects(protocol.logs_prefix(job_id))}
    plan: list[tuple[int, str, int, int]] = []  # worker, log, from, to
    for w, log, offset in logs:
        size = sizes.get(log, 0)
        if tail is not None and size - offset > tail:
            if skipped is not None:
                skipped[w] = skipped.get(w, 0) + size - tail - offset
            offset = size - tail
        if size > offset:
            plan.append((w, log, offset, size))
    return _read_tails(bucket, plan)


def _read_tails(
    bucket: Bucket, plan: list[tuple[int, str, int, int]]
) -> Iterator[tuple[int, str, int, bytes]]:
    first = max(FIRST_BLOCK, READ_BLOCK // max(len(plan), 1))

    def block(start: int, item: tuple[int, str, int, int], most: int) -> bytes:
        try:
            return bucket.read_range(item[1], start, min(most, item[3] - start))
        except NotFoundError:
            return b""

    heads = _each(lambda item: block(item[2], item, first), plan)
    for item, data in zip(plan, heads, strict=True):
        start = item[2]
        while data:
            yield item[0], item[1], start, data
            start += len(data)
            data = block(start, item, READ_BLOCK) if start < item[3] else b""


def resolve(bucket: Bucket, job: str) -> str:
    """The id of the job called `job`: an id as it is, or the newest job with that
    `--name`; NotFoundError (with the way to list jobs) when there is none."""
    if protocol.JOB_ID_RE.match(job):
        return job
    for job_id in reversed(records.list_job_ids(bucket)):
        try:
            if records.read_job_record(bucket, job_id).get("name") == job:
                return job_id
        except NotFoundError:
            continue
    raise NotFoundError(
        f"no job with the id or name {job!r} in gs://{bucket.name}/",
        hint="`tpuctl jobs` lists them (ids look like 20261129-153012-ab12cd)",
    )


# After these a runner may start another attempt (--restarts, --retry-on-failure): a
# cancel leaves the marker, so that attempt never starts.
RESTARTABLE = (protocol.PREEMPTED, protocol.FAILED)


@dataclasses.dataclass
class Cancelled:
    """What a cancel did: the job's state as found, how many running workers it asked to
    stop, and whether it left the cancel marker (so no agent of the job starts its
    script from now on)."""

    state: str
    asked: int
    marked: bool
    teardown: bool  # the job deletes its node at its end


def cancel(bucket: Bucket, job_id: str, interrupted: bool = False) -> Cancelled:
    """Cancel a job: unless it has ended, write its cancel marker (protocol.py: an agent
    that has not started the script yet never starts it), then ask every worker's agent
    that has not ended to stop (a flag in its status object). NotFoundError for an id
    with no job record; a write that fails is an error naming the job. `interrupted`:
    asked by the job's own run on a Ctrl-C (the marker says so)."""
    try:
        record = records.read_job_record(bucket, job_id)
    except NotFoundError:
        raise NotFoundError(
            f"no job {job_id} in gs://{bucket.name}/", hint="see the jobs: `tpuctl jobs`"
        ) from None
    found = statuses(bucket, job_id)
    state = overall([str(s.get("state")) for s in found.values()], int(record.get("workers", 1)))
    marked = state not in FINAL or state in RESTARTABLE
    if marked:  # first: an agent that starts meanwhile sees it (protocol.py)
        try:
            bucket.write_json(
                protocol.cancel_path(job_id),
                protocol.cancel_marker(interrupted=interrupted),
                if_generation_match=0,
            )
        except PreconditionFailedError:
            pass  # cancelled before
        except TpuctlError as e:
            raise _not_cancelled(job_id, e) from e
        found = statuses(bucket, job_id)  # as they are now that the marker is there
    count = 0
    for worker, status in sorted(found.items()):
        if protocol.is_final(status):
            continue
        try:
            bucket.update_json(protocol.status_path(job_id, worker), protocol.with_cancel)
        except TpuctlError as e:
            raise _not_cancelled(job_id, e, worker) from e
        count += 1
    return Cancelled(state, count, marked, bool(record.get("teardown")))


def _not_cancelled(job_id: str, error: TpuctlError, worker: int | None = None) -> TpuctlError:
    what = "its cancel marker" if worker is None else f"worker {worker}'s status"
    failed = TpuctlError(
        f"could not cancel job {job_id}: writing {what} failed: {error}", hint=error.hint
    )
    failed.exit_code = error.exit_code
    return failed
