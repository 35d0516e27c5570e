"""The receipt of a detached job (`run --detach`, services/receipt.py): its client leaves
once the agents run, so nobody times the job's end as `run` does.

Before it leaves, the client keeps what it saw with the job, `tpuctl/jobs/<id>/marks.json`
(create-only): when `run` began, when the node was created (the cloud's clock) and READY,
when the agents ran on every worker, and the node's list price. Whoever sees the job
ended first (`tpuctl jobs JOB`, `tpuctl logs -f JOB`, on any machine) makes the receipt
from those marks and the workers' final statuses (the slowest environment step, the
latest end, by the VMs' clocks) and writes it once, create-only: a second reader gets
that receipt, never one made again. What nobody observed is unknown, not invented: the
node's end after the job (`teardown`; 0 when the node is kept), so the parts add up to
what is known.

The bucket is shared ground: the marks, like the receipt, are only shown, are read in
bounded memory (Bucket.read_json) and left out when they are not what the client writes.
"""

from __future__ import annotations

import contextlib
import math
from typing import TYPE_CHECKING, Any

from tpuctl.agent import protocol
from tpuctl.errors import PreconditionFailedError, TpuctlError
from tpuctl.services import receipt
from tpuctl.services.receipt import Receipt

if TYPE_CHECKING:
    from tpuctl.cloud.storage import Bucket

VERSION = 1
NAME = "marks.json"  # in the job's folder of the bucket
KEPT = ("begin", "created", "ready", "started")  # what a detached client sees
MOST_ACCELERATOR = 64  # characters: longer is no accelerator type of tpuctl's


def save_marks(
    bucket: Bucket, job_id: str, marks: dict[str, float], hourly: float | None, accelerator: str
) -> None:
    """Keep what the detaching client saw (a failure to is no failure of the job's)."""
    value = {
        "version": VERSION,
        "marks": {k: round(marks[k], 3) for k in KEPT if k in marks},
        "hourlyUsd": hourly,
        "accelerator": accelerator,
    }
    with contextlib.suppress(TpuctlError):
        bucket.write_json(protocol.job_path(job_id, NAME), value, if_generation_match=0)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def read_marks(bucket: Bucket, job_id: str) -> tuple[dict[str, float], float | None, str] | None:
    """(marks, hourly USD, accelerator) as the client kept them; None: none, or not so."""
    from tpuctl.services import records

    return records.parsed(bucket, protocol.job_path(job_id, NAME), "receipt's marks", _marks)


def _marks(value: dict[str, Any]) -> tuple[dict[str, float], float | None, str] | None:
    if value.get("version") != VERSION:
        return None
    raw, accelerator = value.get("marks"), value.get("accelerator")
    if not isinstance(raw, dict) or not isinstance(accelerator, str):
        return None
    marks = {k: _number(raw[k]) for k in KEPT if k in raw}
    hourly = value.get("hourlyUsd")
    if None in marks.values() or "started" not in marks or len(accelerator) > MOST_ACCELERATOR:
        return None
    if hourly is not None and _number(hourly) is None:
        return None
    return {k: v for k, v in marks.items() if v is not None}, hourly, accelerator


def of_statuses(
    marks: dict[str, float],
    hourly: float | None,
    accelerator: str,
    statuses: dict[int, dict[str, Any]],
    kept: bool,
) -> Receipt | None:
    """The receipt from the client's marks and the workers' final statuses (None while a
    worker has not ended): the job ended when its last worker did."""
    from tpuctl.services.run.environment import summary

    ends = [_number(s.get("ended")) for s in statuses.values()]
    if not ends or None in ends or not all(protocol.is_final(s) for s in statuses.values()):
        return None
    env = float((summary(statuses) or {}).get("seconds") or 0.0)
    ended = max(e for e in ends if e is not None)
    made = receipt.of_marks({**marks, "ended": ended}, 0.0, env, hourly, accelerator)
    if not kept:
        made.seconds["teardown"] = None  # worker 0 deleted the node: when it was gone, unseen
    return made


def load_or_make(bucket: Bucket, job_id: str, util: float | None = None) -> Receipt | None:
    """The job's receipt: the one kept with it, or, for a detached job that has ended and
    has none yet, one made now (`util`: the TensorCores' mean use, percent) and kept
    (create-only: when another reader was first, theirs)."""
    from tpuctl.services import jobs, records

    found = receipt.load(bucket, job_id)
    if found is not None:
        return found
    kept_marks = read_marks(bucket, job_id)
    if kept_marks is None:
        return None  # not detached, or its client kept nothing
    try:
        record = records.read_job_record(bucket, job_id)
        statuses = jobs.statuses(bucket, job_id)
    except TpuctlError:
        return None
    workers = record.get("workers")
    if not isinstance(workers, int) or len(statuses) < workers:
        return None
    marks, hourly, accelerator = kept_marks
    made = of_statuses(marks, hourly, accelerator, statuses, record.get("teardown") is False)
    if made is None:
        return None
    made.util = util
    try:
        bucket.write_json(
            protocol.job_path(job_id, receipt.NAME), made.to_json(), if_generation_match=0
        )
    except PreconditionFailedError:
        return receipt.load(bucket, job_id)  # another reader wrote it first: that one
    except TpuctlError:
        pass  # shown, not kept (the bucket not writable from here)
    return made
