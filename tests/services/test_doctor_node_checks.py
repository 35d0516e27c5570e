"""tpuctl doctor NODE's verdicts from what the API and the workers' checkup report."""

from __future__ import annotations

import time

from tpuctl.cloud.tpu.wire import node_from_json
from tpuctl.models import Node
from tpuctl.services.node_doctor import checks as nc


def _node(**raw: object) -> Node:
    data = {"name": "projects/p/locations/z/nodes/n", "state": "READY", "health": "HEALTHY",
            "runtimeVersion": "tpu-ubuntu2204-base", **raw}  # fmt: skip
    return node_from_json(data)


def test_node_state_names_preemption_maintenance_and_symptoms() -> None:
    assert nc.node_state(_node()).status == "pass"
    preempted = nc.node_state(_node(state="PREEMPTED"))
    assert preempted.status == "fail" and "cannot be restarted" in preempted.fix
    maintenance = nc.node_state(_node(health="UNHEALTHY_MAINTENANCE"))
    assert (maintenance.status, maintenance.summary) == ("fail", "the node is under maintenance")
    symptoms = [{"symptomType": "HBM_OUT_OF_MEMORY", "details": "chip 2", "workerId": "1"}]
    warned = nc.node_state(_node(symptoms=symptoms))
    assert warned.status == "warn"
    assert "symptom HBM_OUT_OF_MEMORY on worker 1: chip 2" in warned.evidence


def test_a_403_from_storage_is_reported_with_its_message() -> None:
    message = ("HTTP 403: tpu-sa@p.iam.gserviceaccount.com does not have storage.objects.list "
               "access to the Google Cloud Storage bucket.")  # fmt: skip
    report = {"storage": [
        {"url": "gs://data/train/", "write": False, "status": 403, "message": message},
        {"url": "gs://data/empty/", "write": False, "status": 200, "found": False},
        {"url": "gs://p-tpuctl/tpuctl/", "write": True, "status": 200, "found": True},
    ]}  # fmt: skip
    denied, empty, job = nc.storage(0, report)
    assert denied.status == "fail" and denied.evidence == [message]
    assert "roles/storage.objectViewer" in denied.fix
    assert empty.status == "warn" and "nothing is there" in empty.summary
    assert job.status == "pass" and "can write to gs://p-tpuctl/tpuctl/" in job.summary


def test_headroom_thresholds() -> None:
    gib = 1 << 30
    report = {
        "disk": [{"path": "/", "mount": "/", "size": 100 * gib, "free": 3 * gib},
                 {"path": "/tmp", "mount": "/", "size": 100 * gib, "free": 3 * gib},
                 {"path": "/home/u", "mount": "/home", "size": 100 * gib, "free": 8 * gib}],
        "memory": {"total": 100 * gib, "available": 2 * gib},
    }  # fmt: skip
    disk_root, disk_home, memory = nc.headroom(0, report)
    assert (disk_root.status, disk_home.status, memory.status) == ("fail", "warn", "warn")
    assert "3.0 GiB free of 100.0 GiB (3%)" in disk_root.evidence[0]


def test_holders_busy_or_idle_and_since_when() -> None:
    started = time.time() - 3725
    busy = {"pid": 7, "user": "alice", "command": "python3 train.py", "devices": ["/dev/accel0"],
            "started": started, "busy": True, "cpu": 0.97}  # fmt: skip
    check = nc.holders(0, {"holders": [busy]}, [])
    assert check.status == "warn" and "1h02m05s ago" in check.evidence[0]
    assert "busy (97% CPU)" in check.evidence[0]
    idle = nc.holders(0, {"holders": [{**busy, "busy": False, "cpu": 0.0}]}, [])
    assert idle.status == "fail" and "1 idle" in idle.summary


def test_jax_without_libtpu_runs_on_the_cpu() -> None:
    report = {"packages": {"jax": "0.4.30", "jaxlib": "0.4.30", "libtpu": None}}
    check = nc.framework_versions(0, report, "tpu-ubuntu2204-base")
    assert check.status == "fail" and "jax[tpu]" in check.fix
    report["packages"]["libtpu"] = "0.0.2"
    assert nc.framework_versions(0, report, "tpu-ubuntu2204-base").status == "pass"


def test_the_last_job() -> None:
    assert nc.last_job(None, None, []).status == "skip"
    failed = nc.last_job("20261130-120000-abcdef", "FAILED", ["w0: Traceback ..."])
    assert failed.status == "warn" and failed.evidence == ["log tail: w0: Traceback ..."]
    assert nc.last_job("20261130-120000-abcdef", "SUCCEEDED", []).status == "pass"
