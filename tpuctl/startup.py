"""The `startup-script` of a node tpuctl makes: it installs the agent bundle and starts,
detached, on every boot of every worker, the idle watchdog and/or the boot guard
(docs/gc.md, docs/run.md). `services/node_create.py:prepare` decides which (`Startup`) and
writes the script for the node; an adapter that makes several nodes of one request (a
Compute Engine multislice) writes each its own from the same `Startup`, told the node it
runs on."""

from __future__ import annotations

import base64
from dataclasses import dataclass

from tpuctl.agent import bundle

STARTUP_SCRIPT = "startup-script"  # the metadata key
WATCHDOG_DIR = "${HOME:-/root}/.tpuctl"


@dataclass(frozen=True)
class Startup:
    """Which programs a node's startup script starts: the idle watchdog (`idle_action`:
    delete or stop the node once idle past its tpuctl-idle-timeout label; None: none)
    and/or the boot guard (`start_guard`: delete a node made for a job when no agent has
    started by its tpuctl-start-deadline label; agent/guard.py)."""

    idle_action: str | None = None
    start_guard: bool = False

    def script(self, target: tuple[str, ...] = ()) -> str:
        """The node's `startup-script`, for the node `target` names (`--target KIND:NAME`,
        agent/target.py: what the programs run on, as the node's API names it). The guest
        runs it as root, on every boot of every worker; it needs no client, no cron. The
        bundle travels in the script as base64, decoded by python3 (which both need
        anyway) into the bundle's install command."""
        encoded = base64.encodebytes(bundle.build()).decode()  # lines of 76: never the marker
        marker = "TPUCTL_AGENT_PYZ_EOF"
        root = '"$dir"'
        programs = []
        if self.start_guard:
            programs.append(("start-guard.log", bundle.command("guard", *target, root=root)))
        if self.idle_action:
            watch = bundle.command(
                "idle", "watch", "--action", self.idle_action, *target, root=root
            )
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
