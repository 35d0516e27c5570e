"""`tpuctl logs -f`: a running job's log as it is written on the VMs, then the bucket's.

While a worker's agent runs, its log is followed on the VM over SSH with the runner's
own follower (`agent/follow.py`: the log's bytes from an offset, until the agent has
exited); the bucket's copy, which the agent uploads every few seconds, fills in what
came before and what comes after. The offsets are per log object (one per attempt and
worker), and the follower's bytes are the same bytes as the bucket's copy, so nothing is
printed twice and nothing is skipped. When the VMs cannot be reached (the node is gone,
the job was started by another account, no SSH), it says so once and follows the
bucket's copy alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from tpuctl.agent import bundle, protocol
from tpuctl.agent.labels import JOB
from tpuctl.errors import TpuctlError, UsageError
from tpuctl.services import jobs, records, remote
from tpuctl.services import ssh as ssh_service

if TYPE_CHECKING:
    from tpuctl.cloud.backend import TpuBackend
    from tpuctl.cloud.ssh import Endpoint, Session, SshApi
    from tpuctl.cloud.storage import Bucket

Write = Callable[[int, bytes], None]
BUCKET_POLL = 2.0  # seconds between looks at the bucket's copy
NO_LOG = 3  # the follower's exit status when the log is not on this VM (another account)


def follow(
    bucket: Bucket,
    tpu: Sequence[TpuBackend],
    ssh: SshApi,
    job_id: str,
    worker: int | None,
    write: Write,
    note: Callable[[str], None],
) -> str:
    """Print the job's log (`write(worker, bytes)`) until the job has ended; its state.
    `tpu`: the APIs the job's node may be on, in look-up order."""
    record = records.read_job_record(bucket, job_id)
    offsets: dict[str, int] = {}
    followed: set[tuple[int, int, int]] = set()  # (worker, attempt, agent pid) seen to end
    live = True
    while True:
        state, chunks, _ = jobs.read_logs(bucket, job_id, offsets, worker)
        for w, data in chunks:
            write(w, data)
        if state in protocol.FINAL:
            return state
        running = _running(bucket, job_id, worker, followed) if live else {}
        if running:
            try:
                _stream(tpu, ssh, record, job_id, running, offsets, write)
            except TpuctlError as e:
                if _ended(bucket, job_id, running):
                    continue  # the stream went with the node the job's end tore down
                live = False
                note(f"following the bucket's copy of the log (not the VMs: {e})")
            else:  # those agents have exited: the bucket has the rest
                followed.update(_key(w, s) for w, s in running.items())
                continue
        time.sleep(BUCKET_POLL)


def _ended(bucket: Bucket, job_id: str, running: dict[int, dict[str, Any]]) -> bool:
    """Have these workers' agents ended the attempt they were followed in?"""
    now = jobs.statuses(bucket, job_id)
    return all(
        now.get(w, {}).get("attempt") != s.get("attempt") or protocol.is_final(now.get(w))
        for w, s in running.items()
    )


def _key(worker: int, status: dict[str, Any]) -> tuple[int, int, int]:
    return worker, int(status.get("attempt") or 1), int(status["pid"])


def _running(
    bucket: Bucket, job_id: str, worker: int | None, followed: set[tuple[int, int, int]]
) -> dict[int, dict[str, Any]]:
    """The workers whose agent runs the current attempt now, by their status (not those
    already followed to their end: an agent that died leaves its last status behind)."""
    return {
        w: s
        for w, s in jobs.statuses(bucket, job_id).items()
        if (worker is None or w == worker)
        and s.get("state") in protocol.WORKING
        and s.get("pid")
        and s.get("log")
        and _key(w, s) not in followed
    }


def job_plan(
    tpu: Sequence[TpuBackend],
    ssh: SshApi,
    record: dict[str, Any],
    job_id: str,
    workers: list[int],
    refusal: str,
) -> ssh_service.Plan:
    """The SSH plan to these workers of the job's node (of a multislice job: of its
    slices `NODE-0`, `NODE-1`, ..., the workers numbered across them as the agents are,
    slice s's worker k being s * workers per slice + k), only where the node carries the
    job's label: the record naming the node is in the shared bucket, and no key of yours
    goes to, and no session is opened on, a node it names falsely (`refusal` says what
    is then not done)."""
    node = f"projects/{record['project']}/locations/{record['zone']}/nodes/{record['node']}"
    slices = max(1, int(record.get("slices", 1)))
    if slices == 1:
        return _node_plan(tpu, ssh, node, job_id, workers, refusal)
    per = max(1, int(record.get("workers", slices)) // slices)
    workers = [w for w in workers if 0 <= w < slices * per]
    if not workers:
        raise TpuctlError(f"job {job_id}'s record has none of these workers: {refusal}")
    plans = {  # the slices of these workers only (the record is the bucket's: its counts
        # are no bound on the work done here)
        s: _node_plan(
            tpu,
            ssh,
            f"{node}-{s}",
            job_id,
            [w - s * per for w in workers if w // per == s],
            refusal,
        )
        for s in sorted({w // per for w in workers})
    }
    return ssh_service.merged(plans, per)


def _node_plan(
    tpu: Sequence[TpuBackend],
    ssh: SshApi,
    node: str,
    job_id: str,
    workers: list[int],
    refusal: str,
) -> ssh_service.Plan:
    from tpuctl.services.lookup import find_node

    api, found = find_node(tpu, node)
    if found.labels.get(JOB) != job_id:
        raise TpuctlError(
            f"node {found.name} is not job {job_id}'s (its {JOB} label is "
            f"{found.labels.get(JOB) or 'absent'}): {refusal}"
        )
    return ssh_service.plan(api, ssh, node, workers=",".join(map(str, workers)), node=found)


class Refusals(NamedTuple):
    """What a command that reaches a running job's workers says when it cannot."""

    nothing: str  # to a job running nothing: what there is then not to do
    refusal: str  # to a node not carrying the job's label: what is not done there


def running_plan(
    bucket: Bucket,
    tpu: Sequence[TpuBackend],
    ssh: SshApi,
    job_id: str,
    worker: int | None,
    words: Refusals,
) -> tuple[dict[int, dict[str, Any]], ssh_service.Plan]:
    """The workers of the job (of every slice) that run its setup or script now (or
    `worker` alone), with their statuses, and the SSH plan to them (`job_plan`); a job
    running nothing is refused (`words`)."""
    nothing, refusal = words
    record = records.read_job_record(bucket, job_id)
    if worker is not None and not 0 <= worker < int(record.get("workers", 1)):
        raise UsageError(f"job {job_id} has no worker {worker}")
    running = {
        w: s
        for w, s in jobs.statuses(bucket, job_id).items()
        if (worker is None or w == worker)
        and s.get("state") == protocol.RUNNING
        and isinstance(s.get("child_pid"), int)  # (the bucket is shared: only a pid)
    }
    if not running:
        raise TpuctlError(
            f"job {job_id} runs no setup or script now: {nothing}",
            hint=f"`tpuctl jobs {job_id}` shows its state",
        )
    return running, job_plan(tpu, ssh, record, job_id, sorted(running), refusal)


def _stream(
    tpu: Sequence[TpuBackend],
    ssh: SshApi,
    record: dict[str, Any],
    job_id: str,
    running: dict[int, dict[str, Any]],
    offsets: dict[str, int],
    write: Write,
) -> None:
    """Follow these workers' logs on their VMs until their agents have exited. Only on a
    node that carries the job's label: the record naming the node is in the shared bucket,
    and no key of yours goes to, and no session is opened on, a node it names falsely."""
    plan = job_plan(tpu, ssh, record, job_id, sorted(running), "its log is not followed there")
    agent = bundle.build()
    refused: list[str] = []

    async def one(session: Session, ep: Endpoint) -> int:
        status = running[ep.worker]
        name = str(status["log"])  # the bucket's copy: the same bytes
        installed = await session.run(bundle.install_command(), lambda *_: None, stdin=agent)
        if installed:
            return int(installed)
        local = f".tpuctl/jobs/{job_id}/attempt-{int(status.get('attempt', 1))}.log"

        def out(stream: str, data: bytes) -> None:
            if stream == "stdout":
                offsets[name] = offsets.get(name, 0) + len(data)
                write(ep.worker, data)

        follower = bundle.command("follow", local, str(offsets.get(name, 0)), str(status["pid"]))
        code = await session.run(f"test -r {local} || exit {NO_LOG}; {follower}", out)
        if code == NO_LOG:
            refused.append(f"worker {ep.worker} has no log of job {job_id} for this account")
        return int(code)

    # A dropped stream is not tried again here: `follow` looks at the job first (the
    # node is torn down at its end, and a new connection would wait for it in vain).
    results = remote.on_workers(ssh, plan, one, connect_timeout=30.0)
    failed = [r for r in results if r.status]
    if refused:
        raise TpuctlError(refused[0])
    if failed:
        raise TpuctlError(remote.failure_summary(failed) or "the log stream failed")
