"""The job protocol between the laptop (tpuctl.services) and the agent on every worker:
where a job lives in the bucket, the states a worker's status goes through, and
heartbeats (docs/runner-internals.md). Both sides import this one module; it does no I/O,
so each reads and writes with a Storage client of its own.

Standard library only, Python 3.8+: it travels in the agent bundle (bundle.py).
"""

from __future__ import annotations

import time
from typing import Any, Dict

Json = Dict[str, Any]

# -- the bucket's layout ------------------------------------------------------------------
BLOBS, JOBS = "tpuctl/blobs/", "tpuctl/jobs/"


def job_path(job_id: str, *parts: str) -> str:
    return "/".join((JOBS + job_id, *parts))


def status_path(job_id: str, worker: int) -> str:
    return job_path(job_id, "status", f"worker-{worker}.json")


def log_path(job_id: str, attempt: int, worker: int) -> str:
    return job_path(job_id, "logs", f"attempt-{attempt}", f"worker-{worker}.log")


# -- heartbeats -----------------------------------------------------------------------
FINAL = ("SUCCEEDED", "FAILED", "CANCELLED", "LOST", "PREEMPTED")


class Beats:
    """Which workers stopped beating: a worker whose status is not final and whose
    `heartbeat` has not changed for `deadline` seconds (a worker with no status counts
    from the first look). Measured on this machine's monotonic clock, from when a change
    was *seen*: the clocks of two machines are never compared. The client (the runner's
    watch) and worker 0's agent (watching its peers) both use it."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.seen: dict[int, Any] = {}  # worker -> (heartbeat, monotonic time first seen)

    def lost(
        self, statuses: dict[int, Json], workers: Any, deadline: float | None = None
    ) -> list[int]:
        now, limit = time.monotonic(), self.deadline if deadline is None else deadline
        lost: list[int] = []
        for worker in workers:
            status = statuses.get(worker) or {}
            if status.get("state") in FINAL:
                continue
            beat = status.get("heartbeat")
            last = self.seen.get(worker)
            if last is None or last[0] != beat:
                self.seen[worker] = (beat, now)
            elif now - last[1] > limit:
                lost.append(worker)
        return lost

    def silent_for(self, worker: int) -> float:
        last = self.seen.get(worker)
        return time.monotonic() - last[1] if last else 0.0
