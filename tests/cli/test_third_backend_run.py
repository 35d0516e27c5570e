"""A third TPU API creates a node and runs a job on it through the agent, its own VM
target (`--target lab:NAME`, tests/backends/lab_vm.py), and `top` shows its TensorCores'
use, in either order of the registry:
tests/backends/lab.py, registered for the test only, whose nodes stand on Cloud TPU API
nodes of a project of their own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_registry_order import order  # noqa: F401  (the registry both ways)
from tests.emulator.monitoring_helpers import on_worker  # noqa: F401 - a fixture

Z = "us-central1-a"
SCRIPT = """\
import os, sys
print("hello from", os.environ["TPUCTL_WORKER_ID"], "of", os.environ["TPUCTL_NUM_WORKERS"])
sys.stdout.flush()
print("bye")
"""


@pytest.mark.usefixtures("order")
def test_a_lab_node_is_created_and_runs_a_job_through_its_agent(
    cli: Any,
    emulator: Any,
    on_worker: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    r = cli("create", "bench", "-a", "lab-8", "--zone", Z)
    assert r.code == 0, r.err
    # on a Cloud TPU API node of its name in the lab's own project, never listed twice
    (under,) = emulator.nodes()
    assert under["name"] == f"projects/tpuctl-demo-lab/locations/{Z}/nodes/bench"
    r = cli("list", "--zone", Z, "--json")
    assert r.code == 0, r.err
    assert [
        (n["name"], n["project"], n["api"], n["acceleratorType"]) for n in json.loads(r.out)
    ] == [("bench", "tpuctl-demo", "lab", "lab-8")]

    # its TensorCores' use, from its series in the lab's project (monitored_workers)
    trainer = on_worker(under["name"])
    emulator.sample()
    trainer.step("80")
    emulator.sample()
    r = cli("top", "--json")
    assert r.code == 0, r.err
    (row,) = json.loads(r.out)
    assert (row["name"], row["utilization"], row["idleSeconds"]) == ("bench", 40.0, 0)
    r = cli("top")  # no terminal: one snapshot
    assert r.code == 0, r.err
    assert [line.split()[:3] for line in r.out.splitlines() if "bench" in line] == [
        ["bench", Z, "lab-8"]
    ]
    assert "40%" in r.out
    trainer.stop()

    script = tmp_path / "hello.py"
    script.write_text(SCRIPT)
    r = cli("run", str(script), "--node", "bench", "--zone", Z, "--teardown")
    assert r.code == 0, r.err
    assert r.out.startswith("hello from 0 of 1\nbye\n")  # its output, streamed home
    assert "tpuctl-agent: succeeded with exit status 0" in r.out
    # the agent acted on it through the lab's VM target (tests/backends/lab_vm.py)
    assert f"tpuctl-agent: teardown: deleting lab node bench in {Z}" in r.out
    assert "deleted node bench" in r.err
    assert emulator.nodes() == []
    r = cli("list", "--zone", Z, "--json")
    assert r.code == 0 and json.loads(r.out) == [], r.err

    # a run that makes its own lab node deletes it when the job ends
    r = cli("run", str(script), "-a", "lab-8", "--zone", Z)
    assert r.code == 0, r.err
    assert r.out.startswith("hello from 0 of 1\nbye\n")
    assert emulator.nodes() == []
