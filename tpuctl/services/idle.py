"""Is a node idle? Asked of the node itself: tpuctl/agent/idle.py on every worker.

`ssh_probe` is gc's `IdleProbe`: it runs `idle check` of the agent bundle on every
worker over SSH (the bundle travels on stdin into a temporary file, removed after: nothing
is installed) and answers busy, idle or unknown. A worker
it cannot reach or read makes the answer unknown: gc never deletes on a guess.
`startup_script` is the startup script that keeps a watchdog on every worker of a node
created with `--idle-timeout` (see docs/gc.md), and the boot guard of a node made for a
job (docs/run.md).
"""

from __future__ import annotations

import base64
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
WATCHDOG_DIR = "${HOME:-/root}/.tpuctl"


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


def startup_script(
    idle_action: str | None = None, start_guard: bool = False, target: tuple[str, ...] = ()
) -> str:
    """The node's `startup-script`: install the agent bundle and start, detached, on every
    boot of every worker, the idle watchdog (`idle_action`: delete or stop the node once
    idle past its tpuctl-idle-timeout label) and/or the boot guard (delete a node made
    for a job when no agent has started by its tpuctl-start-deadline label; agent/guard.py).
    The guest runs it as root; it needs no client, no cron. The bundle travels in the
    script as base64, decoded by python3 (which both need anyway) into the bundle's
    install command. `target`: what the programs run on, as the node's API names it
    (`--target KIND:NAME`, agent/target.py)."""
    encoded = base64.encodebytes(bundle.build()).decode()  # lines of 76: never the marker
    marker = "TPUCTL_AGENT_PYZ_EOF"
    root = '"$dir"'
    programs = []
    if start_guard:
        programs.append(("start-guard.log", bundle.command("guard", *target, root=root)))
    if idle_action:
        watch = bundle.command("idle", "watch", "--action", idle_action, *target, root=root)
        programs.append(("idle-watchdog.log", watch))
    return (
        "#!/bin/bash\n"
        "# tpuctl: the boot guard and the idle watchdog (docs/run.md, docs/gc.md). Deletes\n"
        "# this node when no agent started by its tpuctl-start-deadline label, or once it\n"
        "# has been idle longer than its tpuctl-idle-timeout label (not if tpuctl-keep=true).\n"
        f'dir="{WATCHDOG_DIR}"\n'
        f"python3 -m base64 -d <<'{marker}' | {{ {bundle.install_command(root)}; }}\n"
        f"{encoded}{marker}\n"
        + "".join(
            f'setsid nohup {command} >> "$dir/{log}" 2>&1 < /dev/null &\n'
            for log, command in programs
        )
    )
