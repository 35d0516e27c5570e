"""`tpuctl emulator stop` of an emulator that does not answer its SIGTERM (it was SIGKILLed
after its grace time) leaves none of its workers' processes behind: they, and the holders
of their PID namespaces (which take nothing but SIGKILL), outlived it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.cli.test_run import wait_for
from tests.emulator.test_worker_env import tpuctl
from tpuctl.emulator.control import daemon
from tpuctl.emulator.core.ports import free_port
from tpuctl.emulator.workers.files import MARKER


def _workers_of(state: Path) -> list[int]:
    """Pids of the worker processes of the emulator on `state` (its workers' homes are
    there), whatever their marker says."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read().split(b"\0")
        except OSError:
            continue
        marked = any(v.startswith(f"{MARKER}=".encode()) for v in environ)
        home = any(v.startswith(f"HOME={state}/".encode()) for v in environ)
        if entry.isdigit() and marked and home:
            found.append(int(entry))
    return found


def test_stopping_an_emulator_that_must_be_killed_leaves_no_worker(
    isolated_env: Path, tmp_path: Path
) -> None:
    port, state = free_port(), tmp_path / "emu"
    env = {k: v for k, v in os.environ.items() if k != "TPUCTL_EMULATOR_HOST"}
    up = tpuctl(
        env, "emulator", "start", "--detach", "--port", str(port), "--state-dir", str(state)
    )
    assert up.returncode == 0, up.stderr
    record = daemon.running(state)
    assert record is not None
    job = None
    try:
        laptop = dict(env, TPUCTL_EMULATOR_HOST=f"127.0.0.1:{port}")
        made = tpuctl(laptop, "create", "n1", "-a", "v3-8", "--zone", "us-central1-a")
        assert made.returncode == 0, made.stderr
        job = subprocess.Popen(
            [sys.executable, "-m", "tpuctl", "exec", "n1", "--zone", "us-central1-a", "--",
             "sleep", "600"],
            env=laptop, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_for(lambda: _workers_of(state), timeout=60)  # a command on the worker
        os.kill(record.pid, signal.SIGSTOP)  # deaf to SIGTERM, as one stuck on its lock
    finally:
        down = tpuctl(env, "emulator", "stop", "--state-dir", str(state))
        if job is not None:
            job.kill()
            job.wait()
    assert down.returncode == 0, down.stderr
    assert not daemon.alive(record.pid)
    assert _workers_of(state) == []
