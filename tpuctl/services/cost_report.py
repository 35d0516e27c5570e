"""What was spent over a period (`tpuctl cost`): every job of the bucket started in it, or
still running, with what its receipt says (services/receipt.py), summed by day, by
accelerator type and by owner.

A finished job's cost is its receipt's: the billed phases at the list price the client
used. A detached job that ended without one gets it made here, as `tpuctl jobs JOB` makes
it (services/late_receipt.py). A running job's cost so far is the hourly price its client
kept (marks.json) times the time since its node was created; a job whose client kept no
price (one `run` still watches) counts its seconds, not dollars. Idle time is an
estimate from the receipt's mean TensorCore use: billed seconds x (100 - util)%; the
overhead is the node's time outside the script (boot, start, environment, recovery,
teardown). Every read goes through records.py: the bucket is shared ground, and a record
or receipt that is not what tpuctl writes is skipped with one note naming it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from tpuctl.agent import protocol
from tpuctl.concurrency import each
from tpuctl.errors import NotFoundError, TpuctlError, UnreadableObjectError
from tpuctl.services import jobs, late_receipt, receipt, records
from tpuctl.services.receipt import Receipt

if TYPE_CHECKING:
    from tpuctl.cloud.storage import Bucket
    from tpuctl.services.names import Owner

READERS = 8  # jobs read at once (the storage client's connection pool holds 10)
OVERHEAD = ("boot", "start", "environment", "recovery", "teardown")
RUNNING = "running"
FINISHED = "finished"  # SUCCEEDED: the script exited 0
NO_OWNER = "(not recorded)"  # a job record an older tpuctl wrote names no owner


@dataclass
class Row:
    """One job's part of the report."""

    job: str
    owner: str
    accelerator: str
    day: str  # YYYY-MM-DD (UTC) of its start
    status: str  # finished, failed, cancelled..., running; "no receipt" where none is
    billed: float | None  # seconds (None: no receipt)
    usd: float | None  # None: no price (or no receipt)
    idle: float | None = None  # seconds, estimated from the mean TensorCore use
    overhead: float | None = None  # seconds of the billed phases other than the script
    util: float | None = None
    price_source: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "owner": self.owner,
            "accelerator": self.accelerator,
            "day": self.day,
            "status": self.status,
            "billedSeconds": _tenths(self.billed),
            "costUsd": None if self.usd is None else round(self.usd, 4),
            "utilization": self.util,
            "idleSeconds": _tenths(self.idle),
            "overheadSeconds": _tenths(self.overhead),
            "priceSource": self.price_source,
        }


@dataclass
class Sum:
    """Jobs summed: billed seconds, dollars of those with a price, the idle estimate
    (over the jobs whose receipt has a mean use), overhead seconds."""

    jobs: int = 0
    billed: float = 0.0
    usd: float = 0.0
    unpriced: int = 0  # jobs whose seconds are counted but not their dollars
    idle: float = 0.0
    idle_of: float = 0.0  # the billed seconds the idle estimate is over
    overhead: float = 0.0

    def add(self, row: Row) -> None:
        self.jobs += 1
        self.billed += row.billed or 0.0
        if row.usd is None:
            self.unpriced += row.billed is not None
        else:
            self.usd += row.usd
        if row.idle is not None and row.billed:
            self.idle += row.idle
            self.idle_of += row.billed
        self.overhead += row.overhead or 0.0

    @property
    def idle_share(self) -> float | None:
        return self.idle / self.idle_of if self.idle_of else None

    @property
    def overhead_share(self) -> float | None:
        return self.overhead / self.billed if self.billed else None

    def to_json(self) -> dict[str, Any]:
        share = self.idle_share
        overhead = self.overhead_share
        return {
            "jobs": self.jobs,
            "billedSeconds": round(self.billed, 1),
            "costUsd": round(self.usd, 4),
            "unpricedJobs": self.unpriced,
            "idleShare": None if share is None else round(share, 4),
            "overheadShare": None if overhead is None else round(overhead, 4),
        }


@dataclass
class Report:
    since: float  # unix time the period starts
    until: float
    rows: list[Row] = field(default_factory=list)

    def by(self, key: Callable[[Row], str]) -> dict[str, Sum]:
        sums: dict[str, Sum] = {}
        for row in self.rows:
            sums.setdefault(key(row), Sum()).add(row)
        return dict(sorted(sums.items()))

    @property
    def total(self) -> Sum:
        whole = Sum()
        for row in self.rows:
            whole.add(row)
        return whole

    @property
    def without_receipt(self) -> int:
        return sum(r.billed is None for r in self.rows)

    def to_json(self) -> dict[str, Any]:
        total = self.total
        return {
            "period": {"since": _iso(self.since), "until": _iso(self.until)},
            "jobs": [r.to_json() for r in self.rows],
            "by_day": {k: v.to_json() for k, v in self.by(lambda r: r.day).items()},
            "by_type": {k: v.to_json() for k, v in self.by(lambda r: r.accelerator).items()},
            "by_owner": {k: v.to_json() for k, v in self.by(lambda r: r.owner).items()},
            "total": total.to_json(),
            "unpriced_jobs": total.unpriced,
            "jobs_without_receipt": self.without_receipt,
        }


def report(
    bucket: Bucket,
    period: float,
    owner: Owner | None,
    now: float | None = None,
    told: Callable[[int], None] | None = None,
) -> Report:
    """The jobs of the last `period` seconds (and every job still running) of `owner`
    (None: everyone's), newest first; `told(n)` is called with the number of jobs to read
    before they are read."""
    now = time.time() if now is None else now
    since = now - period
    records_found = [
        r for r in each(lambda j: _record(bucket, j), records.list_job_ids(bucket), READERS) if r
    ]
    wanted = [r for r in records_found if owner is None or owner.owns(r.get("owner") or None)]
    if told is not None:
        told(len(wanted))
    rows = each(lambda r: _row(bucket, r, since, now), wanted, READERS)
    found = [r for r in rows if r is not None]
    return Report(since, now, sorted(found, key=lambda r: r.job, reverse=True))


def _record(bucket: Bucket, job_id: str) -> dict[str, Any] | None:
    try:
        return records.read_job_record(bucket, job_id)
    except NotFoundError:
        return None
    except UnreadableObjectError as e:  # one job's record hides no other job
        records.note(protocol.job_record_path(job_id), e.message)
        return None


def _row(bucket: Bucket, record: dict[str, Any], since: float, now: float) -> Row | None:
    """The job's row, or None when it started before `since` and is no longer running."""
    job_id = str(record["id"])
    started = record.get("created_unix")
    start = float(started) if isinstance(started, int | float) else _id_time(job_id)
    try:
        state = jobs.job_state(
            bucket, job_id, jobs.statuses(bucket, job_id).values(), int(record["workers"])
        )
    except TpuctlError as e:  # the bucket unreadable for this job: noted, not fatal
        records.note(protocol.job_prefix(job_id), e.message)
        return None
    running = state == protocol.RUNNING
    if start < since and not running:
        return None
    row = Row(
        job=job_id,
        owner=str(record.get("owner") or NO_OWNER),
        accelerator=str(record.get("accelerator") or "-"),
        day=datetime.fromtimestamp(start, timezone.utc).strftime("%Y-%m-%d"),
        status=FINISHED if state == protocol.SUCCEEDED else state.lower(),
        billed=None,
        usd=None,
    )
    if running:
        return _so_far(bucket, row, now)
    found = _receipt(bucket, job_id)
    if found is None:
        row.status += " (no receipt)"
        return row
    made, row.price_source = found
    row.accelerator = made.accelerator or row.accelerator
    row.billed, row.usd, row.util = made.billed, made.cost(), made.util
    row.overhead = sum(made.seconds.get(p) or 0.0 for p in OVERHEAD)
    if made.util is not None:
        row.idle = made.billed * max(0.0, 100.0 - made.util) / 100.0
    return row


def _so_far(bucket: Bucket, row: Row, now: float) -> Row:
    """A running job: the seconds since its node was created (as its client marked it)
    at the hourly price its client kept; without marks, no figures."""
    kept = late_receipt.read_marks(bucket, row.job)
    if kept is None:
        row.status = f"{RUNNING} (no price kept)"
        return row
    marks, hourly, accelerator = kept
    since = marks.get("created", marks.get("ready", marks["started"]))
    row.billed = max(0.0, now - since)
    row.usd = None if hourly is None else hourly * row.billed / 3600
    row.accelerator = accelerator or row.accelerator
    return row


def _receipt(bucket: Bucket, job_id: str) -> tuple[Receipt, str | None] | None:
    """The job's receipt and its price source (when it names one); a detached job's is
    made now when nobody has made it (late_receipt.py). None: none, or not a receipt
    (noted)."""
    path = protocol.job_path(job_id, receipt.NAME)
    value = records.read(bucket, path, records.ANY, "receipt")
    if value is None:
        made = late_receipt.load_or_make(bucket, job_id)
        return None if made is None else (made, None)
    parsed = receipt.from_json(value)
    if parsed is None:
        records.note(f"gs://{bucket.name}/{path}", "not a receipt tpuctl writes")
        return None
    source = value.get("price_source") or value.get("price")  # where its price came from
    return parsed, source[:200] if isinstance(source, str) and source else None


def _id_time(job_id: str) -> float:
    """A job's start as its id says it (20261129-153012-ab12cd: UTC)."""
    try:
        stamp = datetime.strptime(job_id[:15], "%Y%m%d-%H%M%S")
    except ValueError:
        return 0.0
    return stamp.replace(tzinfo=timezone.utc).timestamp()


def _tenths(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 1)


def _iso(unix: float) -> str:
    return datetime.fromtimestamp(unix, timezone.utc).isoformat(timespec="seconds")
