"""Is a node idle? Asked of the node itself: tpuctl/agent/idle.py on every worker.

`ssh_probe` is gc's `IdleProbe`: it runs `idle check` of the agent bundle on every
worker over SSH (the bundle travels on stdin into a temporary file, removed after: nothing
is installed) and answers busy, idle or unknown. A worker
it cannot reach or read makes the answer unknown: gc never deletes on a guess.
The startup script that keeps a watchdog on every worker of a node created with
`--idle-timeout` (see docs/gc.md), and the boot guard of a node made for a job
(docs/run.md), is tpuctl/startup.py's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from tpuctl.agent import bundle
from tpuctl.errors import TpuctlError
from tpuctl.models import Node

if TYPE_CHECKING:
    from tpuctl.cloud.backend import TpuBackend
    from tpuctl.cloud.ssh import Endpoint, Session, SshApi

Busy = Literal["busy", "idle", "unknown"]
IdleProbe = Callable[[Node], tuple[Busy, str]]
"""Looks at the node itself: ("busy", why) / ("idle", why) / ("unknown", why)."""

PROBE_TIMEOUT = 20.0  # seconds a worker may take to answer before it counts as unknown


# As root where the VM lets us (passwordless sudo, as TPU VMs give their SSH users): a
# process of another user would otherwise hide what it holds. The bundle goes to a
# temporary file the shell removes on exit, and runs checked against the client's sha256
# (bundle.run), as everywhere: a job's process may rewrite the file in between.
def bundle_on_stdin(*args: str) -> str:
    """The shell command that runs the bundle's ARGS with the bundle read from stdin, as
    root where passwordless sudo allows (tpuctl doctor NODE's checkup uses it too)."""
    run = bundle.run('"$t"', *args)
    return (
        't="$(mktemp)" && trap \'rm -f "$t"\' EXIT && cat > "$t" || exit 1; '
        'if [ "$(id -u)" != 0 ] && sudo -n true 2>/dev/null; '
        f"then sudo -n -E {run}; else {run}; fi"
    )


CHECK_COMMAND = bundle_on_stdin("idle", "check")


def verdict(node: str, answers: dict[int, dict | str]) -> tuple[Busy, str]:  # type: ignore[type-arg]
    """Combine the workers' answers (their check's JSON, or why there is none)."""
    busy, unknown = [], []
    for worker, answer in sorted(answers.items()):
        if isinstance(answer, str):
            said = answer if answer.startswith(f"worker {worker} ") else f": {answer}"
            unknown.append(f"worker {worker}{said.removeprefix(f'worker {worker}')}")
        elif answer.get("busy"):
            busy.append(f"worker {worker}: {'; '.join(answer.get('reasons') or ['busy'])}")
        elif answer.get("unreadable"):
            unknown.append(
                f"worker {worker}: {answer['unreadable']} process(es) could not be inspected"
            )
    if busy:
        return "busy", "busy on the node: " + "; ".join(busy)
    if unknown:
        return "unknown", "; ".join(unknown)
    n = len(answers)
    return "idle", f"no job, session or TPU device holder on its {n} worker(s)"


def ssh_probe(api: TpuBackend, ssh: SshApi, timeout: float = PROBE_TIMEOUT) -> IdleProbe:
    """gc's probe: run the bundle's idle check on every worker of a node over SSH."""
    from tpuctl.services import remote
    from tpuctl.services import ssh as ssh_service

    source = bundle.build()

    def probe(node: Node) -> tuple[Busy, str]:
        try:
            plan = ssh_service.plan(api, ssh, node.full_name, "all", wait=timeout)
        except TpuctlError as e:
            return "unknown", f"cannot reach it: {e}"
        outputs: dict[int, bytearray] = {ep.worker: bytearray() for ep in plan.endpoints}

        async def action(session: Session, ep: Endpoint) -> int:
            def collect(stream: str, data: bytes) -> None:
                if stream == "stdout":
                    outputs[ep.worker] += data

            return await session.run(CHECK_COMMAND, collect, stdin=source)

        answers: dict[int, dict | str] = {}  # type: ignore[type-arg]
        for result in remote.on_workers(ssh, plan, action, connect_timeout=timeout):
            if result.status:
                answers[result.worker] = result.error or f"check exited {result.status}"
                continue
            try:
                answers[result.worker] = dict(json.loads(outputs[result.worker].splitlines()[-1]))
            except (ValueError, IndexError):
                answers[result.worker] = "the check said nothing readable"
        return verdict(node.name, answers)

    return probe
