"""The live suite runs only under `scripts/live_test.py` (`make test-live`), which picks
the accelerator, prices the run, asks, names the run and sweeps after it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest


@dataclass(frozen=True)
class Live:
    project: str
    zone: str
    run: str  # tlive-<id>-: the prefix of every name this run creates
    accelerator: str
    ttl: str

    def name(self, scenario: str) -> str:
        return f"{self.run}{scenario}"


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@pytest.fixture(scope="session")
def live() -> Live:
    try:
        return Live(
            os.environ["TPUCTL_LIVE_PROJECT"],
            os.environ["TPUCTL_LIVE_ZONE"],
            os.environ["TPUCTL_LIVE_RUN"],
            os.environ["TPUCTL_LIVE_ACCELERATOR"],
            os.environ["TPUCTL_LIVE_TTL"],
        )
    except KeyError as e:
        pytest.exit(f"run the live suite with `make test-live`, not pytest ({e} is not set)", 2)


@pytest.fixture(scope="session")
def tpuctl(live: Live) -> Callable[..., Result]:
    """Run the installed tpuctl as a user would, in the live project."""

    def run(*args: str, timeout: float = 1800) -> Result:
        env = dict(os.environ, TPUCTL_PROJECT=live.project, NO_COLOR="1")
        done = subprocess.run(
            [sys.executable, "-m", "tpuctl", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        print(f"$ tpuctl {' '.join(args)}\n{done.stdout}{done.stderr}")  # shown on failure
        return Result(done.returncode, done.stdout, done.stderr)

    return run
