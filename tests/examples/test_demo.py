"""`make demo`'s script end to end: its own emulator, the job, and nothing left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tpuctl.emulator.core.ports import free_port

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo.sh"


@pytest.mark.long
def test_demo_runs_the_job_and_leaves_nothing_behind(isolated_env: Path, tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_port()}"
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {
        **os.environ,
        "TPUCTL_EMULATOR_HOST": address,  # nothing answers there: the demo starts its own
        "TMPDIR": str(temp),
        "TPUCTL_DEMO_OUTPUTS": str(tmp_path / "outputs"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    r = subprocess.run(
        ["bash", str(DEMO)], env=env, capture_output=True, text=True, timeout=240, check=False
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Demo done" in r.stdout
    assert "$ tpuctl run examples/train.py" in r.stdout
    assert "\x1b[" not in r.stdout  # NO_COLOR and no terminal: no escape sequences
    assert list((tmp_path / "outputs").iterdir())  # the outputs came back
    assert list(temp.iterdir()) == []  # no tpuctl-demo.* state dir left in the temp dir
    try:  # and the emulator it started is gone
        urllib.request.urlopen(f"http://{address}/_emulator/v1/status", timeout=2)
        answered = True
    except OSError:
        answered = False
    assert not answered
