"""A process on an emulated worker that uses its TPU devices as docs/metrics.md defines."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

# A program "on the TPU": opens every device of its worker, and on each line of stdin
# writes that line to them (a step's work, e.g. "75"); holding them is not work.
PROGRAM = """
import os, sys
devs = [open(p, "a") for p in os.environ["TPUCTL_TPU_DEVICES"].split(",")]
print("holding", flush=True)
for line in sys.stdin:
    for d in devs:
        d.write(line); d.flush()
    print("wrote", flush=True)
"""


class OnWorker:
    """A process on an emulated worker: the worker's environment makes it one."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", PROGRAM], env=env, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        )  # fmt: skip
        assert self.proc.stdout and self.proc.stdout.readline() == "holding\n"

    def step(self, line: str = "100") -> None:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline() == "wrote\n"

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def on_worker(emulator_server: Any) -> Iterator[Any]:
    started: list[OnWorker] = []

    def start(node_name: str, worker: int = 0) -> OnWorker:
        env = {**os.environ, **emulator_server.backend.worker_env(node_name, worker)}
        env.pop("TPUCTL_EMULATOR_HOST", None)
        started.append(OnWorker(env))
        return started[-1]

    yield start
    for p in started:
        p.stop()
