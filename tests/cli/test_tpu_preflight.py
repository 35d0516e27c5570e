"""The agent looks at the worker's TPU before the job (agent/tpu_preflight.py): a worker
whose device files are gone ends the attempt as a TPU failure, `"reason":
"tpu_unhealthy"` with the evidence, without starting the script (what the runner does
then, a repair, is test_run_repair's); a libtpu lock left by no live process is removed,
said in the job's log, and the job runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_run import bucket_objects, wait_for
from tpuctl.emulator.control.client import ControlError

ZONE = "us-central1-a"
FULL = f"projects/tpuctl-demo/locations/{ZONE}/nodes/pre"
SCRIPT = """\
import os
open(os.path.expanduser("~/ran"), "w").write("1")
print("the script ran", flush=True)
"""
EVIDENCE = "no TPU device files (/dev/accel*) on worker 0"


@pytest.fixture
def node(cli: Any, emulator: Any, tmp_path: Path) -> Any:
    assert cli("create", "pre", "-a", "v3-8", "-z", ZONE).code == 0
    (tmp_path / "job.py").write_text(SCRIPT)
    yield "pre"
    if any(n["name"] == FULL for n in emulator.nodes()):
        assert cli("delete", "pre", "-z", ZONE, "--yes").code == 0


def _status(emulator: Any, job: str) -> dict[str, Any]:
    name = f"tpuctl/jobs/{job}/status/worker-0.json"
    found = bucket_objects(emulator, lambda n: n == name)
    return json.loads(found[name]) if name in found else {}


def test_a_worker_without_its_device_files_ends_the_attempt_as_a_tpu_failure(
    cli: Any, emulator: Any, emulator_server: Any, node: str, tmp_path: Path
) -> None:
    emulator.worker_fault(FULL, "no-device")
    home = Path(emulator_server.backend.worker_env(FULL, 0)["HOME"])
    r = cli("run", str(tmp_path / "job.py"), "--node", node, "-z", ZONE, "--json", "--detach")
    assert r.code == 0, r.err
    job = json.loads(r.out)["job"]
    wait_for(lambda: _status(emulator, job).get("state") == "FAILED")
    status = _status(emulator, job)
    assert status["attempt"] == 1 and status["exit_status"] is None
    assert status["reason"] == "tpu_unhealthy" and status["evidence"] == EVIDENCE
    row = json.loads(cli("jobs", job, "--json").out)
    assert row["state"] == "FAILED" and row["exitStatus"] is None
    assert row["tpuUnhealthy"] == {"worker": 0, "evidence": EVIDENCE}
    log = bucket_objects(emulator)[f"tpuctl/jobs/{job}/logs/attempt-1/worker-0.log"].decode()
    assert f"tpuctl-agent: error: {EVIDENCE}: the job is not started" in log
    assert "the script ran" not in log and not (home / "ran").exists()  # it never started
    assert any(n["name"] == FULL for n in emulator.nodes())  # left to the runner


def test_a_stale_libtpu_lock_is_removed_and_the_job_runs(
    cli: Any, emulator: Any, emulator_server: Any, node: str, tmp_path: Path
) -> None:
    emulator.worker_fault(FULL, "stale-lockfile")
    home = Path(emulator_server.backend.worker_env(FULL, 0)["HOME"])
    lock = home.parent / "root" / "tmp" / "libtpu_lockfile"
    assert lock.exists()
    r = cli("run", str(tmp_path / "job.py"), "--node", node, "-z", ZONE)
    assert r.code == 0, r.err
    said = "tpuctl-agent: removed a stale libtpu lock left by no live process"
    assert said in r.out and "the script ran" in r.out
    assert r.out.index(said) < r.out.index("the script ran")
    assert not lock.exists() and (home / "ran").exists()


def test_on_compute_engine_the_vfio_files_are_checked_and_health_is_not_a_fault(
    cli: Any, emulator: Any, tmp_path: Path
) -> None:
    (tmp_path / "job.py").write_text(SCRIPT)
    assert cli("create", "c7", "-a", "tpu7x-8", "-z", "us-central1-c").code == 0
    try:
        (vm,) = emulator.instances()
        with pytest.raises(ControlError, match="no health or symptoms field"):
            emulator.worker_fault(vm["name"], "unhealthy")
        emulator.worker_fault(vm["name"], "no-device")
        flags = ["--node", "c7", "-z", "us-central1-c", "--json", "--detach"]
        r = cli("run", str(tmp_path / "job.py"), *flags)
        assert r.code == 0, r.err
        job = json.loads(r.out)["job"]
        wait_for(lambda: _status(emulator, job).get("state") == "FAILED")
        status = _status(emulator, job)
        assert status["reason"] == "tpu_unhealthy"
        assert status["evidence"] == "no TPU device files (/dev/vfio/*) on worker 0"
    finally:
        assert cli("delete", "c7", "-z", "us-central1-c", "--yes").code == 0
