"""The job protocol between the laptop (tpuctl.services) and the agent on every worker:
where a job lives in the bucket, the states a worker's status goes through and what a
job's state is made of, heartbeats, and the rules by which a status object is changed
(contributing/runner-internals.md). Both sides import this one module. It does no I/O: each side
reads and writes the objects with a Storage client of its own, and asks this module what
to write.

Standard library only, Python 3.8+: it travels in the agent bundle (bundle.py).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from typing import Any, Dict, Iterable

Json = Dict[str, Any]

# -- the bucket's layout ------------------------------------------------------------------
#   tpuctl/blobs/<sha256>                                  file contents, shared by all jobs
#   tpuctl/jobs/<job-id>/request.json                      what runs: the request (immutable)
#   tpuctl/jobs/<job-id>/job.json                          the job record (a description)
#   tpuctl/jobs/<job-id>/cancel.json                       the job cancelled (`cancel_marker`)
#   tpuctl/jobs/<job-id>/status/worker-<k>.json            worker k's status
#   tpuctl/jobs/<job-id>/logs/attempt-<a>/worker-<k>.log   worker k's log of attempt a
#   tpuctl/jobs/<job-id>/outputs/[slice-<s>/]...           TPUCTL_OUTPUT_DIR, merged
#   tpuctl/jobs/<job-id>/stacks/<stamp>/worker-<k>.txt     `tpuctl stacks`: one take
#   tpuctl/jobs/<job-id>/profile/<stamp>/<name>.xplane.pb  `tpuctl profile`: one take
ROOT = "tpuctl/"
BLOBS = ROOT + "blobs/"
JOBS = ROOT + "jobs/"
# Sortable and unique: `20261129-153012-ab12cd` (UTC time, then 24 random bits).
JOB_ID_RE = re.compile(r"^\d{8}-\d{6}-[0-9a-f]{6}$")


def blob_path(sha256: str) -> str:
    return BLOBS + sha256


def job_prefix(job_id: str) -> str:
    return f"{JOBS}{job_id}/"


def job_path(job_id: str, *parts: str) -> str:
    return "/".join((JOBS + job_id, *parts))


def job_record_path(job_id: str) -> str:
    return job_path(job_id, "job.json")


def request_path(job_id: str) -> str:
    return job_path(job_id, "request.json")


def cancel_path(job_id: str) -> str:
    return job_path(job_id, "cancel.json")


def status_prefix(job_id: str) -> str:
    return job_prefix(job_id) + "status/"


def status_path(job_id: str, worker: int) -> str:
    return job_path(job_id, "status", f"worker-{worker}.json")


def logs_prefix(job_id: str) -> str:
    return job_prefix(job_id) + "logs/"


def log_path(job_id: str, attempt: int, worker: int) -> str:
    return job_path(job_id, "logs", f"attempt-{attempt}", f"worker-{worker}.log")


def stacks_path(job_id: str, stamp: str, worker: int) -> str:
    """Worker k's stacks of one `tpuctl stacks` (`stamp`: its UTC time, YYYYmmdd-HHMMSS)."""
    return job_path(job_id, "stacks", stamp, f"worker-{worker}.txt")


def profile_path(job_id: str, stamp: str, name: str) -> str:
    """A trace of one `tpuctl profile` (`name`: `worker-<k>`, or `worker-<k>-<pid>` when
    several processes of worker k were traced), as TensorBoard and XProf name a host's."""
    return job_path(job_id, "profile", stamp, f"{name}.xplane.pb")


def outputs_prefix(job_id: str, slice_id: int | None = None) -> str:
    """Where the workers' outputs go: one namespace for the job, or, on a multislice
    job, one per slice."""
    return job_prefix(job_id) + "outputs/" + ("" if slice_id is None else f"slice-{slice_id}/")


# -- the request ------------------------------------------------------------------------
# What a VM runs is exactly what the user submitted. The request (`request_path`) holds
# all of it: the script, its args, the setup command, the names of the env variables,
# the code manifest (each file's sha256 and mode) and the Python environment to run in
# (`environment`: the requirement set, or None; envkeys.py). The client writes it once (generation
# 0) and keeps its digest, the sha256 of its canonical JSON (`request_digest`), which it
# gives each agent on the SSH start (`--digest`), a path that nothing in the bucket can
# change. The agent runs nothing before the request it reads matches that digest and each
# code file its sha256 in the manifest (`verified_request`, transfer.fetch_code); a
# mismatch is refused (`Refused`), saying why: the attempt ends FAILED and is torn down
# as usual. Every VM of a job may write under tpuctl/jobs/ (its status, logs, outputs),
# so any object there may have been rewritten by another job's script; the record
# (job.json) only describes the job for the laptop's commands, and the mutable state
# (statuses, cancel marker) lives in objects of its own.
REQUEST_VERSION = 2
REQUEST_KEYS = (
    "version",
    "id",
    "script",
    "args",
    "setup",
    "env",
    "manifest",
    "environment",
    "image",  # `run --image`: {"name": by digest, "registry": host[, "pythonpath"]} (container.py)
)
FILE_MODES = (0o755, 0o644)  # the only modes a code file gets on the VM


# What the client gives each agent start for the job's trust (signing.Trust: the job's
# key, the client key's public name, the environments it vouched for) goes over SSH, in
# the JSON object of its standard input beside the env values, as a JSON text under this
# name (no environment variable can be named with `=`, so none of it reaches a script).
TRUST = "=trust"


class Refused(Exception):
    """What the agent will not run, and why (said in the job's log and status)."""


def canonical(value: Any) -> bytes:
    """The one byte form of a JSON value that its digest is taken of."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def request_digest(request: Json) -> str:
    return hashlib.sha256(canonical(request)).hexdigest()


def file_mode(entry: Json) -> int:
    """A manifest entry's mode, masked: 0o755 when the owner may execute it, else 0o644
    (no setuid, setgid, sticky or group/other write bit ever reaches the VM)."""
    return FILE_MODES[0] if int(entry.get("mode", 0o644)) & 0o100 else FILE_MODES[1]


def verified_request(value: Json | None, job_id: str, digest: str) -> Json:
    """The request read from the bucket, once it is the one submitted (`digest`, as the
    SSH start gave it); `Refused` otherwise."""
    where = request_path(job_id)
    if not digest:
        raise Refused("no request digest was given to the agent (--digest): nothing runs")
    if value is None:
        raise Refused(
            f"job {job_id} has no request ({where}): it was deleted, or the job was "
            "submitted by an older tpuctl; submit it again"
        )
    found = request_digest(value)
    if found != digest:
        raise Refused(
            f"the request in the bucket ({where}) is not the one submitted: its sha256 is "
            f"{found[:16]}..., the client submitted {digest[:16]}...; it was changed after "
            "submission (by a script of another job?), so nothing of it runs"
        )
    if value.get("version") != REQUEST_VERSION or value.get("id") != job_id:
        raise Refused(
            f"the request {where} is not a version {REQUEST_VERSION} request of job {job_id}"
        )
    return value


# -- states ---------------------------------------------------------------------------------
# A worker's status (`state`), in the order an attempt goes through them:
STARTING = "STARTING"  # the agent has started
FETCHING = "FETCHING"  # it downloads the code and the outputs of earlier attempts
RUNNING = "RUNNING"  # the setup, then the script (`phase`)
SUCCEEDED = "SUCCEEDED"  # the script exited 0
FAILED = "FAILED"  # the setup or the script failed, or the agent did
CANCELLED = "CANCELLED"  # stopped on request (`cancel`, a signal)
LOST = "LOST"  # the agent died, or stopped beating for the deadline
PREEMPTED = "PREEMPTED"  # the VM was preempted; the outputs were synced first
WORKING = (STARTING, FETCHING, RUNNING)  # an agent works on the attempt
FINAL = (SUCCEEDED, FAILED, CANCELLED, LOST, PREEMPTED)  # the attempt has ended
# A job's state (`overall`) is a worker state, or, before any worker reported, PENDING.
PENDING = "PENDING"
# The worst state first: what a job whose workers ended differently shows.
WORST_FIRST = (FAILED, LOST, PREEMPTED, CANCELLED)


def overall(states: Iterable[str], expected: int) -> str:
    """One state for a job from its workers' states: the worst final one once every
    worker's is final, else RUNNING (some reported) or PENDING (none did)."""
    states = list(states)
    if len(states) >= expected and states and all(s in FINAL for s in states):
        for s in WORST_FIRST:
            if s in states:
                return s
        return SUCCEEDED
    return RUNNING if states else PENDING


# -- changing a status ------------------------------------------------------------------------
# Worker k's agent writes its status at each phase and every heartbeat, each write
# conditional on the generation it last saw. Others write it too: the client (a cancel,
# the end of a job whose agents never started or were lost) and worker 0's agent (a peer
# lost), always by read-modify-write under the generation precondition, with what these
# functions return for the value read (None: no status yet).
def is_final(status: Json | None, attempt: int | None = None) -> bool:
    """Has this status ended its attempt (`attempt`'s, when given)?"""
    if not status or status.get("state") not in FINAL:
        return False
    return attempt is None or status.get("attempt") == attempt


def cancel_asked(status: Json | None, attempt: int) -> bool:
    """Was the agent of `attempt` asked to stop (`"cancel": true` in its status)? The
    agent keeps the request in what it writes next."""
    return bool(status and status.get("attempt") == attempt and status.get("cancel"))


def with_cancel(status: Json | None) -> Json:
    """The status with the request to stop."""
    return dict(status or {}, cancel=True)


# A preemption notice passed on. Compute Engine preempts the VMs of a slice one at a
# time, and only the preempted VM gets the notice; the others would run on until the
# slice is deleted or made again, and lose what they wrote since their last output sync.
# So the agent of a worker whose VM got the notice, and the client once it sees a worker
# PREEMPTED or the node lost, write `"notice": WHY` in every other worker's status of
# the attempt; each agent then ends the attempt as on a notice of its own (the script
# gets SIGTERM, the outputs are synced a last time, the status says PREEMPTED).
def notice_asked(status: Json | None, attempt: int) -> str:
    """Why the agent of `attempt` was told that the attempt ends on a preemption ("":
    it was not)."""
    if not status or status.get("attempt") != attempt:
        return ""
    return str(status.get("notice") or "")


def with_notice(status: Json | None, attempt: int, why: str) -> Json | None:
    """The status with the notice passed on; None when there is nothing to tell (no
    status of `attempt` yet, one already final or already told)."""
    if not status or status.get("attempt") != attempt or is_final(status):
        return None
    if status.get("notice"):
        return None
    return dict(status, notice=why)


# A job is cancelled as a whole by its cancel marker (`cancel_path`), which reaches agents
# that have written no status yet: the client writes it before it asks the running agents
# to stop, and every agent reads it after its status says the phase it is about to start
# (the setup, the script) and before it starts it. So a job that a client, after writing
# the marker, saw PENDING, STARTING or FETCHING never runs its setup or script: an agent
# that read no marker had already written RUNNING, which the client would have seen.
def cancel_marker(now: float | None = None, interrupted: bool = False) -> Json:
    """What the client writes at `cancel_path` to cancel the job; `interrupted` when the
    run that started it was interrupted (Ctrl-C: it exits INTERRUPTED_EXIT, and `tpuctl
    jobs` shows that, not the status the script was stopped with, 143 for SIGTERM)."""
    marker: Json = {"cancel": True, "asked": round(time.time() if now is None else now, 3)}
    return {**marker, "interrupted": True} if interrupted else marker


INTERRUPTED_EXIT = 130  # what `tpuctl run` exits with when interrupted (128 + SIGINT)


def cancel_marked(marker: Json | None) -> bool:
    """Was the job cancelled (the object at `cancel_path`, None when there is none)?"""
    return bool(marker and marker.get("cancel"))


def ended(
    status: Json | None,
    worker: int,
    attempt: int,
    state: str,
    message: str,
    now: float | None = None,
) -> Json:
    """A final `state` written for a worker by someone else than its agent (which could
    not: never started, dead, silent): never over a final status of the same attempt,
    which stays as it is; with `cancel`, so that an agent that was only slow stops."""
    if is_final(status, attempt):
        return dict(status or {})
    when = round(time.time() if now is None else now, 3)
    return dict(
        status or {},
        worker=worker,
        attempt=attempt,
        state=state,
        message=message,
        cancel=True,
        ended=when,
    )


# -- heartbeats -----------------------------------------------------------------------------
class Beats:
    """Which workers stopped beating: a worker whose status is not final and whose
    `heartbeat` has not changed for `deadline` seconds (a worker with no status counts
    from the first look; `unstarted`, when given, is its allowance instead: an agent
    that has not started yet may still be on its way while its starter keeps trying).
    Measured on this machine's monotonic clock, from when a change
    was *seen*: the clocks of two machines are never compared. The client (the runner's
    watch) and worker 0's agent (watching its peers) both use it."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.seen: dict[int, Any] = {}  # worker -> (heartbeat, monotonic time first seen)

    def lost(
        self,
        statuses: dict[int, Json],
        workers: Any,
        deadline: float | None = None,
        unstarted: float | None = None,
    ) -> list[int]:
        now, limit = time.monotonic(), self.deadline if deadline is None else deadline
        lost: list[int] = []
        for worker in workers:
            status = statuses.get(worker) or {}
            if is_final(status):
                continue
            beat = status.get("heartbeat")
            last = self.seen.get(worker)
            if last is None or last[0] != beat:
                self.seen[worker] = (beat, now)
                continue
            waited = limit if beat is not None or unstarted is None else unstarted
            if now - last[1] > waited:
                lost.append(worker)
        return lost

    def silent_for(self, worker: int) -> float:
        last = self.seen.get(worker)
        return time.monotonic() - last[1] if last else 0.0


# -- words both sides print ---------------------------------------------------------------
# The agent's `profile` says this (its last line on stderr) on a worker with no process
# that can be profiled; the client, when every worker says it, says it once for the job.
NO_PROFILER = (
    "no process of the job on this worker has imported jax or tensorflow: `tpuctl profile` "
    "traces JAX and TensorFlow scripts (one run with python -I, -E or -S cannot be asked)"
)


def size(n: float) -> str:
    """A byte count as people read it: `162 B`, `6.8 KiB`, `9.1 GiB` (binary units, as
    gcloud storage prints them); the exact count stays in --json and the statuses."""
    if abs(n) < 1024:
        return f"{int(n)} B"
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024
        if abs(n) < 1024:
            return f"{n:.1f} {unit}"
    return f"{n / 1024:.1f} TiB"
