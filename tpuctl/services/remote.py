"""Commands and copies on many workers at once, with tpuctl's own SSH client.

Every chosen worker gets its own connection, all at once (or at most `max_parallel`;
the SSH client also caps the handshakes in flight and the connections the process has
files for). A worker that does not answer yet is retried with back-off until
`connect_timeout`, as a VM that is still booting would need, without holding a slot
while it waits, so one dead worker never holds up the others; a refused host key is
never retried. Each worker ends with a `WorkerResult`; `exit_status` combines them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tpuctl.concurrency import run_async
from tpuctl.errors import (
    AuthRejected,
    ConnectionDropped,
    HostKeyMismatch,
    SshError,
    Unreachable,
)
from tpuctl.services.ssh import Plan
from tpuctl.waiting import aretrying

if TYPE_CHECKING:
    from tpuctl.cloud.ssh import Endpoint, Session, SshApi

WorkerOutput = Callable[[int, str, bytes], None]
"""Receives (worker, "stdout" | "stderr", bytes) as remote commands write them."""

UNREACHABLE_STATUS = 255  # what OpenSSH's client exits with when the connection fails
HOST_KEY_HINT = (
    "tpuctl trusts only the host keys a node publishes in its guest attributes and "
    "rewrites its known-hosts file from them on every connection, so there is no stale "
    "entry to delete. If the node was just recreated, try again once it has published "
    "its new keys; otherwise something else answers at that address: do not connect"
)


@dataclass
class WorkerResult:
    worker: int
    status: int
    error: str | None = None  # why the worker could not run it (None: it ran)
    host_key_refused: bool = False


def exit_status(results: Sequence[WorkerResult]) -> int:
    """The first non-zero status in worker order (0 when every worker succeeded)."""
    for result in sorted(results, key=lambda r: r.worker):
        if result.status:
            return result.status
    return 0


def failure_summary(results: Sequence[WorkerResult]) -> str | None:
    """`failed on 2 of 4 workers:` and a line per failed worker, or None."""
    failed = [r for r in sorted(results, key=lambda r: r.worker) if r.status]
    if not failed:
        return None
    lines = [f"failed on {len(failed)} of {len(results)} workers:"]
    lines += [f"  {r.error or f'worker {r.worker}: exit status {r.status}'}" for r in failed]
    return "\n".join(lines)


async def _on_worker(
    ssh: SshApi,
    plan: Plan,
    ep: Endpoint,
    deadline: float,
    action: Callable[[Session], Awaitable[int]],
    limit: asyncio.Semaphore,
    idempotent: bool = False,
    action_timeout: float | None = None,
    retry_if: Callable[[int], bool] | None = None,
) -> WorkerResult:

    async def worth_another_try(e: BaseException) -> bool:
        # A booting VM refuses connections, and takes a moment to pick up a new key;
        # an action whose connection dropped is run again only when it is safe to repeat.
        wanted = (
            isinstance(e, Unreachable)
            or (isinstance(e, AuthRejected) and plan.key_added)
            or (isinstance(e, ConnectionDropped) and idempotent)
        )
        return wanted and await _still(retry_if, ep)

    async def attempt() -> int:
        async with limit, ssh.session(ep, plan.user, plan.key, plan.known_hosts) as session:
            if action_timeout is None:
                return await action(session)
            try:
                return await asyncio.wait_for(action(session), action_timeout)
            except asyncio.TimeoutError:
                raise ConnectionDropped(
                    f"{ep.host}: no answer within {int(action_timeout)}s"
                ) from None

    retrying = aretrying(worth_another_try, timeout=max(0.0, deadline - time.monotonic()))
    try:
        return WorkerResult(ep.worker, await retrying(attempt))
    except HostKeyMismatch as e:
        return WorkerResult(ep.worker, UNREACHABLE_STATUS, str(e), host_key_refused=True)
    except AuthRejected as e:
        return WorkerResult(ep.worker, UNREACHABLE_STATUS, f"{e}{_why_refused(plan)}")
    except (Unreachable, ConnectionDropped) as e:
        return WorkerResult(ep.worker, UNREACHABLE_STATUS, str(e))
    except SshError as e:  # e.g. a file to copy that is not there
        return WorkerResult(ep.worker, 1, str(e))


def _why_refused(plan: Plan) -> str:
    """What most likely made a worker refuse the key, as far as the plan can tell."""
    project = plan.node.project
    if plan.oslogin:
        return (
            f" (OS Login: the account needs roles/compute.osLogin, or roles/compute.osAdminLogin,"
            f" in project {project})"
        )
    if plan.unsure:
        return (
            f" (tpuctl could not read project {project}'s metadata ({plan.unsure}); if the "
            "project enforces OS Login, set enable-oslogin=TRUE in the node's metadata)"
        )
    return ""


async def _ticking(tick: Callable[[float], None]) -> None:
    """`tick(seconds waited)` every second, until cancelled."""
    started = time.monotonic()
    while True:
        await asyncio.sleep(1.0)
        tick(time.monotonic() - started)


async def _still(retry_if: Callable[[int], bool] | None, ep: Endpoint) -> bool:
    """Is another attempt on this worker still wanted? (asked off the event loop)"""
    return True if retry_if is None else await asyncio.to_thread(retry_if, ep.worker)


def on_workers(
    ssh: SshApi,
    plan: Plan,
    action: Callable[[Session, Endpoint], Awaitable[int]],
    max_parallel: int = 0,
    connect_timeout: float = 60.0,
    idempotent: bool = False,
    action_timeout: float | None = None,
    retry_if: Callable[[int], bool] | None = None,
    tick: Callable[[float], None] | None = None,
) -> list[WorkerResult]:
    """Run `action` with a session on every endpoint of the plan; results in worker order.

    With `idempotent`, an action whose connection dropped (or that got no answer within
    `action_timeout` seconds) is run again on a new one. `retry_if(worker)`, when given,
    is asked before every new attempt (e.g. "has it not happened already?"). `tick`, when
    given, is called every second with the seconds waited (a progress line's heartbeat:
    retries may go on for `connect_timeout` seconds).
    """

    async def main() -> list[WorkerResult]:
        deadline = time.monotonic() + connect_timeout
        limit = asyncio.Semaphore(max_parallel if max_parallel > 0 else len(plan.endpoints))

        def one(ep: Endpoint) -> Awaitable[WorkerResult]:
            return _on_worker(
                ssh,
                plan,
                ep,
                deadline,
                lambda s: action(s, ep),
                limit,
                idempotent,
                action_timeout,
                retry_if,
            )

        # The gather awaited as it is: a Ctrl-C that cancels this task cancels every
        # worker's action with it (the ticker is a task beside it, cancelled at the end).
        ticker = asyncio.ensure_future(_ticking(tick)) if tick is not None else None
        try:
            return list(await asyncio.gather(*(one(ep) for ep in plan.endpoints)))
        finally:
            if ticker is not None:
                ticker.cancel()

    return run_async(main())


def run_command(
    ssh: SshApi,
    plan: Plan,
    command: str,
    output: WorkerOutput,
    max_parallel: int = 0,
    connect_timeout: float = 60.0,
) -> list[WorkerResult]:
    """Run a shell command line on every worker of the plan, streaming its output."""

    async def action(session: Session, ep: Endpoint) -> int:
        return await session.run(command, lambda stream, data: output(ep.worker, stream, data))

    return on_workers(ssh, plan, action, max_parallel, connect_timeout)


def copy_to(
    ssh: SshApi,
    plan: Plan,
    sources: Sequence[Path],
    target: str,
    recurse: bool = False,
    max_parallel: int = 0,
    connect_timeout: float = 60.0,
) -> list[WorkerResult]:
    """Copy local files to `target` on every worker of the plan."""

    async def action(session: Session, ep: Endpoint) -> int:
        await session.put(sources, target, recurse)
        return 0

    return on_workers(ssh, plan, action, max_parallel, connect_timeout)


def copy_from(
    ssh: SshApi,
    plan: Plan,
    sources: Sequence[str],
    target: Callable[[int], Path],
    recurse: bool = False,
    max_parallel: int = 0,
    connect_timeout: float = 60.0,
) -> list[WorkerResult]:
    """Copy remote files from every worker of the plan to `target(worker)`."""

    async def action(session: Session, ep: Endpoint) -> int:
        destination = target(ep.worker)
        await session.get(sources, destination, recurse)
        return 0

    return on_workers(ssh, plan, action, max_parallel, connect_timeout)


def wait_ssh(ssh: SshApi, plan: Plan, timeout: float = 300.0) -> list[WorkerResult]:
    """Wait until SSH answers (and runs `true`) on every worker of the plan."""
    return run_command(ssh, plan, "true", lambda *_: None, connect_timeout=timeout)
