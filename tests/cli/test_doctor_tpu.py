"""tpuctl doctor NODE on a broken TPU, as `tpuctl run` meets it (agent/tpu_preflight.py):
the device files gone (emulator worker-fault no-device), a stale libtpu lock, a node
whose health and symptoms say it is unwell (worker-fault unhealthy); each named with its
fix."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

ZONE = "us-central1-a"
FULL = f"projects/tpuctl-demo/locations/{ZONE}/nodes/{{}}"


@contextmanager
def _node(cli: Any, name: str, accelerator: str = "v3-8") -> Iterator[str]:
    assert cli("create", name, "-a", accelerator, "-z", ZONE).code == 0
    try:
        yield FULL.format(name)
    finally:
        assert cli("delete", name, "-z", ZONE, "--yes").code == 0


def _checks(out: str) -> dict[str, dict[str, Any]]:
    return {c["check"]: c for c in json.loads(out)["checks"]}


@pytest.mark.parametrize(
    ("accelerator", "first", "wanted"),
    [("v3-8", "/dev/accel0", "/dev/accel*"), ("v5litepod-4", "/dev/vfio/0", "/dev/vfio/*")],
)
def test_missing_device_files_fail_with_the_fix(
    cli: Any, emulator: Any, accelerator: str, first: str, wanted: str
) -> None:
    with _node(cli, "dev", accelerator) as full:
        r = cli("doctor", "dev", "--json")
        devices = _checks(r.out)["tpu-devices"]
        # one per chip, each once (the worker shows them at /dev)
        assert devices["status"] == "pass" and devices["summary"] == "4 TPU device(s)"
        assert devices["evidence"][0] == first
        emulator.worker_fault(full, "no-device")
        r = cli("doctor", "dev", "--json")
        assert r.code == 1
        devices = _checks(r.out)["tpu-devices"]
        assert devices["status"] == "fail"
        assert devices["summary"] == f"no TPU device files ({wanted}) on the worker"
        assert "`tpuctl delete dev` and create it again" in devices["fix"]
        assert "`tpuctl run` ends a job on this worker as a TPU failure" in devices["fix"]


def test_a_stale_lock_names_run_and_exec_as_fixes(cli: Any, emulator: Any) -> None:
    with _node(cli, "lock") as full:
        emulator.worker_fault(full, "stale-lockfile")
        lock = _checks(cli("doctor", "lock", "--json").out)["libtpu-lockfile"]
        assert lock["status"] == "fail"
        assert "`tpuctl run` removes it before its job starts" in lock["fix"]
        assert "`tpuctl exec NODE -- sudo rm /tmp/libtpu_lockfile`" in lock["fix"]


def test_an_unhealthy_worker_fault_fails_the_node_state(cli: Any, emulator: Any) -> None:
    with _node(cli, "sick") as full:
        emulator.worker_fault(full, "unhealthy")
        r = cli("doctor", "sick")
        assert r.code == 1
        assert "FAIL  node-state       the node is unhealthy (UNHEALTHY_TENSORFLOW)" in r.out
        assert "symptom MESH_BUILD_FAIL on worker 0: the TPU mesh could not be built" in r.out
        state = _checks(cli("doctor", "sick", "--json").out)["node-state"]
        assert "`tpuctl delete sick` and create it again" in state["fix"]
