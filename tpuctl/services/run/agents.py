"""The agent protocol from the client's side: install the agent on every worker and
start it for one attempt (over SSH), then read what the agents write to the bucket
(status objects, contributing/runner-internals.md) and ask them to stop (cancel)."""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Any

from tpuctl.agent import bundle, protocol
from tpuctl.agent.protocol import Beats
from tpuctl.errors import (
    CloudError,
    PermissionDeniedError,
    PreconditionFailedError,
    SshError,
    TpuctlError,
    WaitTimedOut,
)
from tpuctl.services import jobs, remote
from tpuctl.services import ssh as ssh_service
from tpuctl.services.run import vouching
from tpuctl.services.run.spec import MEGASCALE_PORT, Job
from tpuctl.waiting import Progress, noop, poll_until

if TYPE_CHECKING:
    from tpuctl.cloud.ssh import Endpoint

REMOTE_ROOT = "~/.tpuctl"
STATUS_POLL = 1.0
HEARTBEAT = 2  # seconds between the agents' status writes
# After a node can no longer run the job (a VM of a slice preempted): how long the agents
# that still work may take to end the attempt as on a notice (their budget is 20 s, then
# a last sync), and the silence after which one is taken for gone with its VM.
NOTICE_WAIT = 45.0
NOTICE_SILENCE = 3 * HEARTBEAT
START_TIMEOUT = 60.0  # an agent start with no answer by then is a lost one: retried
# A VM still booting: its workers' host keys, then their SSH, may take this long each
# (as `create --wait-ssh` allows); the job's lease keeps the node while the client waits.
BOOT_WAIT = 300.0
# How long the agents that started may wait for one that has not (worker 0 counts a peer
# with no status as lost only then, not at --heartbeat-deadline): the client's own bound
# for starting them all, its SSH retries (BOOT_WAIT) and a last start's answer. The
# slices of a multislice job start once every slice has capacity (services/queued.py),
# so a slice that waited for capacity never runs against it; one whose VMs answer SSH
# later than the others' does.
START_WAIT = BOOT_WAIT + START_TIMEOUT


def slice_plan(job: Job, progress: Progress = noop) -> tuple[ssh_service.Plan, list[list[str]]]:
    """One SSH plan for every worker of every slice, the endpoints numbered across the
    job (slice s, worker k: s * workers per slice + k), and the agent arguments of a
    multislice job by worker (none for one slice). The MEGASCALE coordinator is worker 0
    of slice 0, at its internal address (the slices reach each other over the data-
    center network), on MEGASCALE_PORT. `progress`: told while the workers have not
    published their host keys yet."""
    a = job.adapters
    internal = job.spec.node_spec.internal_ip_only  # a node made with no external IPs
    plans = [
        ssh_service.plan(a.backend, a.ssh, name, "all", internal, wait=BOOT_WAIT, progress=progress)
        for name in job.slice_names
    ]
    if len(plans) == 1:
        return plans[0], []
    per = len(plans[0].node.workers)
    coordinator = f"{plans[0].node.workers[0].internal_ip}:{MEGASCALE_PORT}"
    merged = ssh_service.merged(dict(enumerate(plans)), per)
    extra = [
        [
            "--slice",
            str(g // per),
            "--slices",
            str(len(plans)),
            "--coordinator",
            coordinator,
            "--request",
            job.node_name,
        ]
        for g in range(len(merged.endpoints))
    ]
    return merged, extra


def start(job: Job) -> None:
    """Install and start the agent of the current attempt on every worker (of every
    slice)."""
    a, bucket = job.adapters, job.bucket
    assert bucket is not None
    started: dict[int, dict[str, Any]] = {}
    changed: dict[int, str] = {}  # a worker whose bundle was not the one sent: its line

    async def install_and_start(session: Any, ep: Endpoint) -> int:
        status = await session.run(
            bundle.install_command(REMOTE_ROOT), lambda *_: None, stdin=agent
        )
        if status:
            return status
        out = bytearray()
        command = bundle.command(
            "agent",
            "start",
            "--job-id",
            job.job_id,
            "--bucket",
            bucket.name,
            "--worker",
            str(ep.worker),
            "--heartbeat",
            str(HEARTBEAT),
            "--attempt",
            str(job.attempt),
            "--sync-every",
            str(job.spec.sync_every),
            "--stale",
            str(job.spec.heartbeat_deadline),
            "--start-wait",
            str(START_WAIT),
            "--hang-after",
            str(job.spec.hang_after),
            # what the user submitted, by SSH: the bucket cannot change it (protocol.py)
            "--digest",
            job.digest,
            *(["--teardown"] if job.agent_teardown else []),
            *(multislice[ep.worker] if multislice else []),
            # what the job runs on, as the API's adapter names it (agent/target.py)
            *a.backend.kind.agent_target(slice_of(job, ep.worker)),
            root=REMOTE_ROOT,
        )
        err = bytearray()
        status = await session.run(
            command,
            lambda stream, data: (out if stream == "stdout" else err).extend(data),
            stdin=env_json,
        )
        if status == 0:
            started[ep.worker] = start_reply(ep.host, bytes(out))
        elif status == bundle.REFUSED:  # changed on the VM since the install: said as is
            said = err.decode(errors="replace").strip().splitlines()
            changed[ep.worker] = said[-1] if said else f"exit status {status}"
        return int(status)

    with job.ui.progress("starting the job on every worker:") as update:
        # What install_and_start uses. A VM still booting has not published its host
        # keys yet: the wait for them shows on this line, and only when there is one.
        job.plan, multislice = slice_plan(job, lambda _, waited: update("host keys", waited))
        agent = bundle.build()
        # the env values and the job's trust (its own key, never the client's; what the
        # client vouched for): by SSH only, never the bucket (vouching.py)
        env_json = json.dumps({**job.spec.env, protocol.TRUST: vouching.trust(job)}).encode()
        job.agent_teardown = tears_down(job)
        update("SSH", 0.0)
        # Installing is idempotent, and so is `agent start` for one job and attempt
        # (a second start reports the running agent), so a dropped connection is simply
        # tried again...
        results = remote.on_workers(
            a.ssh,
            job.plan,
            install_and_start,
            connect_timeout=BOOT_WAIT,
            idempotent=True,
            action_timeout=START_TIMEOUT,
            # ...unless the agent is known to run already (its answer was what got lost)
            retry_if=lambda worker: worker not in reported(job),
            tick=lambda waited: update("SSH", waited),  # a heartbeat while workers retry
        )
    if changed:
        worker, line = min(changed.items())
        raise CloudError(f"could not start the job on worker {worker}: {line}")
    lost = [r for r in results if r.status and r.worker not in started]
    if lost:
        # The answer may be what was lost (e.g. a job so short that its node was already
        # torn down): an agent that reported a status did start.
        lost = [r for r in lost if r.worker not in statuses(job)]
    failed = remote.failure_summary(lost) if lost else None
    if failed:
        raise CloudError(f"could not start the job: {failed}")
    refused = sorted((w, info) for w, info in started.items() if info.get("error"))
    if refused:  # the agent's preflight: the VM's service account lacks something
        worker, info = refused[0]
        fix = str(info.get("fix") or "")
        raise PermissionDeniedError(
            f"worker {worker}: {info['error']}",
            str(info.get("permission") or ""),
            hint=(f"`{fix}`" if fix.startswith("gcloud ") else fix) or None,
        )
    job.pids = {w: int(info["pid"]) for w, info in started.items()}
    job.logs = {w: str(info["log"]) for w, info in started.items()}
    job.agents_started = job.ran = True


def slice_of(job: Job, worker: int) -> str:
    """The node worker `worker` (numbered across the job, as `slice_plan` numbers it) is
    a VM of: the job's node, or its slice of a multislice job."""
    assert job.plan is not None
    names = job.slice_ids
    return names[worker * len(names) // len(job.plan.endpoints)]


def tears_down(job: Job) -> bool:
    """Does worker 0's agent delete the node when this attempt ends? Not when a failure
    may still be retried (--retry-on-failure, restarts left): the next attempt needs the
    node, and the client deletes it at the job's end. A detached run has no next attempt."""
    spec = job.spec
    retried = spec.retry_on_failure and not spec.detach and job.attempt <= spec.restarts
    return bool(spec.teardown) and not retried


def start_reply(host: str, out: bytes) -> dict[str, Any]:
    """The agent start's answer, its last line: `{"pid": N, "log": PATH, ...}`. Anything
    else is the worker's failure, said as an SSH one (never an unexpected JSONDecodeError)."""
    lines = out.decode(errors="replace").strip().splitlines()
    try:
        reply = json.loads(lines[-1])
        reply = {**reply, "pid": int(reply["pid"]), "log": str(reply["log"])}
    except (IndexError, ValueError, TypeError, KeyError):
        said = repr(lines[-1][:120]) if lines else "nothing"
        raise SshError(f"{host}: the agent's start answered {said}, not its pid") from None
    return dict(reply)


def statuses(job: Job) -> dict[int, dict[str, Any]]:
    """The workers' status objects of the current attempt."""
    assert job.bucket is not None
    return {
        w: s
        for w, s in jobs.statuses(job.bucket, job.job_id).items()
        if int(s.get("attempt", 1)) == job.attempt
    }


def reported(job: Job) -> dict[int, dict[str, Any]]:
    """`statuses`, or {} when the bucket cannot be read right now."""
    try:
        return statuses(job)
    except TpuctlError:
        return {}


def all_final(current: dict[int, dict[str, Any]], workers: int) -> bool:
    return len(current) >= workers and all(protocol.is_final(s) for s in current.values())


def cancel(job: Job) -> None:
    """Ask every worker's agent to stop the job on a Ctrl-C (it then tears down as
    usual). A write that fails is said and the stop goes on: the watch that follows ends
    the job all the same (a silent agent is lost, the node torn down)."""
    assert job.bucket is not None
    try:
        jobs.cancel(job.bucket, job.job_id, interrupted=True)
    except TpuctlError as e:
        job.ui.info(f"warning: {e}")


def find_lost(job: Job, current: dict[int, dict[str, Any]], workers: int, silence: float) -> bool:
    """Note in `job.lost` the workers whose agents have been silent for `silence` seconds
    (as `job.beats` saw them); True when there are any."""
    if job.beats is None:
        job.beats = Beats(job.spec.heartbeat_deadline)
    for w in job.beats.lost(current, range(workers), silence):
        job.lost[w] = job.beats.silent_for(w)
    return bool(job.lost)


def mark_lost(job: Job) -> None:
    """Record LOST for the lost workers (their agents cannot) and ask every other worker's
    agent to stop the job."""
    assert job.bucket is not None
    silent = int(max(job.lost.values(), default=0))
    message = f"no heartbeat for {silent}s (--heartbeat-deadline)"
    jobs.mark_final(job.bucket, job.job_id, sorted(job.lost), job.attempt, protocol.LOST, message)
    cancel(job)


def wait_final(
    job: Job, workers: int, timeout: float, silence: float | None = None
) -> dict[int, dict[str, Any]]:
    """The statuses once every worker's is final (or, with `silence`, once every other
    worker's agent has been silent that long: lost), or as they are after `timeout`."""

    def check() -> tuple[dict[int, dict[str, Any]] | None, str]:
        current = statuses(job)
        if all_final(current, workers):
            return current, protocol.RUNNING
        if silence is not None:
            find_lost(job, current, workers, silence)
            if all(protocol.is_final(current.get(w)) or w in job.lost for w in range(workers)):
                return current, protocol.RUNNING
        return None, protocol.RUNNING

    try:
        return poll_until(
            check,
            what=f"job {job.job_id}",
            timeout=timeout,
            poll=STATUS_POLL,
            factor=1.0,
            timed_out=lambda state, elapsed: WaitTimedOut(f"job {job.job_id} is still {state}"),
        )
    except WaitTimedOut:
        return statuses(job)


def agent_teardown_failed(job: Job) -> bool:
    """Did worker 0's agent say its delete of the node failed?"""
    status = reported(job).get(0, {})
    return str(status.get("teardown", "")).startswith("failed")


def pass_notice(job: Job, workers: int, why: str) -> None:
    """Pass a preemption notice on to the agents that have not ended the attempt
    (protocol.with_notice): each ends it as on a notice of its own, its outputs synced.
    A write that fails is skipped: `settle_preempted` records what they could not."""
    assert job.bucket is not None
    for worker in range(workers):
        name = protocol.status_path(job.job_id, worker)
        for _ in range(5):
            try:
                value, generation = job.bucket.read_json(name)
                told = protocol.with_notice(value, job.attempt, why)
                if told is not None:
                    job.bucket.write_json(name, told, if_generation_match=generation)
            except PreconditionFailedError:
                continue  # its agent wrote meanwhile: read it again
            except TpuctlError:  # none yet, or unreadable now
                pass
            break


def settle_preempted(job: Job, workers: int, state: str) -> None:
    """The node can no longer run the job (`state`), and some agents may still work: on
    a Compute Engine slice only the preempted VM goes, the others run on. Before the node
    is deleted or made again, they are told (`pass_notice`) and given NOTICE_WAIT to sync
    their outputs and report; a worker whose agent did not (its VM went first, or it went
    silent) is recorded PREEMPTED, so that no status of the attempt stays RUNNING."""
    current = reported(job)
    if all_final(current, workers):
        return
    pass_notice(job, workers, f"the node is {state}")
    final = wait_final(job, workers, NOTICE_WAIT, silence=NOTICE_SILENCE)
    job.lost = {}  # silent with their VM: preempted, not lost
    left = [w for w in range(workers) if not protocol.is_final(final.get(w))]
    if not left:
        return
    assert job.bucket is not None
    message = f"its agent did not report before the node was {state}"
    with contextlib.suppress(TpuctlError):
        jobs.mark_final(job.bucket, job.job_id, left, job.attempt, protocol.PREEMPTED, message)
