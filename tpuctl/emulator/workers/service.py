"""The workers' SSH servers: a front of the emulator (no API of the cloud's), started
once the HTTP server serves (`core/service.py`'s Front)."""

from __future__ import annotations

from typing import Any

from tpuctl.emulator.core.service import Front


def _start_ssh(backend: Any, host: str, port: int, state_dir: Any, verbose: bool) -> Any:
    """SSH on every worker of every READY node; it tells the backend its port (the
    status's `ssh_port`). Port 0: a free one."""
    from tpuctl.emulator.workers.ssh import SshWorkers

    return SshWorkers(backend, port or None).start()


SSH = Front("ssh", _start_ssh, "after", False)
