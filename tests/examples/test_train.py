"""The example training script: learns, checkpoints, and resumes where it stopped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "train.py"


def run(out: Path, *args: str, **env: str) -> str:
    r = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        env={**os.environ, "TPUCTL_OUTPUT_DIR": str(out), **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return r.stdout


def test_trains_and_resumes_from_checkpoint(tmp_path: Path) -> None:
    first = run(tmp_path, "--steps", "30")
    assert "resumed" not in first
    metrics = json.loads((tmp_path / "metrics-worker0.json").read_text())
    assert metrics["accuracy"] > 0.8  # it really learns
    second = run(tmp_path, "--steps", "50", TPUCTL_RESTART="1")
    assert second.splitlines()[0].startswith("resumed from step 30")
    assert "step    10 " not in second  # continued, did not start over
    assert "step    40 " in second
    assert json.loads((tmp_path / "metrics-worker0.json").read_text())["restart"] == 1


def test_workers_train_on_their_own_shard(tmp_path: Path) -> None:
    run(tmp_path, "--steps", "10", TPUCTL_WORKER_ID="1", TPUCTL_NUM_WORKERS="4")
    assert (tmp_path / "checkpoint-worker1.npz").exists()
    assert json.loads((tmp_path / "metrics-worker1.json").read_text())["worker"] == 1
