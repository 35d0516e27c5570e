"""`agent start` proves the VM's service account can do what the job needs before the
script starts (agent/preflight.py): write and delete under the job's folder, and, on the
worker that tears down, delete its node. A refusal ends the job at once: the start
answers the missing permission and the gcloud command that grants it, the log and (when
the bucket takes it) a FAILED status say so, and the script never runs."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from tests.agent.conftest import PROJECT, Cluster, wait_for
from tpuctl.emulator.tpu.models import project_number

DEFAULT_SA = f"{project_number(PROJECT)}-compute@developer.gserviceaccount.com"
SCRIPT = {"train.py": "print('the script ran', flush=True)\n"}


def _start(cluster: Cluster, node: str, job: str) -> dict:
    proc = cluster.worker(node, 0).popen("start", job, cluster.bucket.name)
    out, err = proc.communicate("{}", timeout=60)
    assert proc.returncode == 0, err
    return dict(json.loads(out.strip().splitlines()[-1]))


def _deny(cluster: Cluster, *permissions: str) -> None:
    cluster.emulator.config(
        service_accounts={DEFAULT_SA: {"denied_permissions": list(permissions)}}
    )


def test_no_write_access_to_the_bucket_fails_the_start(cluster: Cluster) -> None:
    node = cluster.create_node("pf1")
    job = cluster.stage(SCRIPT, node, teardown=True)
    _deny(cluster, "storage.objects.create")
    reply = _start(cluster, node, job)
    assert reply["pid"] == 0 and reply["permission"] == "storage.objects.create"
    assert (
        f"{DEFAULT_SA} lacks storage.objects.create on gs://{cluster.bucket.name}"
        in (reply["error"])
    )
    assert reply["fix"] == (
        f"gcloud storage buckets add-iam-policy-binding gs://{cluster.bucket.name} "
        f"--member=serviceAccount:{DEFAULT_SA} --role=roles/storage.objectUser"
    )
    log = Path(reply["log"]).read_text()
    assert "storage.objects.create" in log and "the script ran" not in log
    assert cluster.status(job) is None  # the bucket took nothing from it


def test_no_right_to_delete_the_node_fails_the_start(cluster: Cluster) -> None:
    node = cluster.create_node("pf2")
    job = cluster.stage(SCRIPT, node, teardown=True)
    _deny(cluster, "tpu.nodes.delete")
    reply = _start(cluster, node, job)
    assert reply["permission"] == "tpu.nodes.delete"
    assert reply["fix"] == (
        f"gcloud projects add-iam-policy-binding {PROJECT} "
        f"--member=serviceAccount:{DEFAULT_SA} --role=roles/tpu.admin"
    )
    status = cluster.status(job)
    assert status and status["state"] == "FAILED" and "tpu.nodes.delete" in status["message"]
    # the probe object is gone again; the node is left to the runner
    assert not cluster.bucket.names(f"tpuctl/jobs/{job}/probe/")
    assert cluster.node_names() == [node]


def test_a_job_that_keeps_its_node_needs_no_delete_right(cluster: Cluster) -> None:
    node = cluster.create_node("pf3")
    job = cluster.stage(SCRIPT, node, teardown=False)
    _deny(cluster, "tpu.nodes.delete")
    reply = _start(cluster, node, job)
    assert reply["pid"] > 0 and "error" not in reply


def test_a_token_without_a_storage_scope_fails_the_start(cluster: Cluster) -> None:
    from google.cloud import tpu_v2

    parent = f"projects/{PROJECT}/locations/us-central1-a"
    account = tpu_v2.ServiceAccount(scope=["https://www.googleapis.com/auth/devstorage.read_only"])
    body = tpu_v2.Node(
        accelerator_type="v3-8", runtime_version="tpu-ubuntu2204-base", service_account=account
    )
    cluster.emulator.tpu_client().create_node(parent=parent, node_id="pf4", node=body).result(10)
    node = f"{parent}/nodes/pf4"
    job = cluster.stage(SCRIPT, node, teardown=True)
    reply = _start(cluster, node, job)
    assert "lacks the OAuth scope for Cloud Storage" in reply["error"]
    assert "devstorage.read_only" in reply["error"]
    assert "https://www.googleapis.com/auth/cloud-platform" in reply["fix"]


def test_without_resource_manager_a_node_read_stands_in(cluster: Cluster) -> None:
    node = cluster.create_node("pf5")
    job = cluster.stage({"train.py": "import time\ntime.sleep(600)\n"}, node, teardown=True)
    cluster.emulator.config(services={"cloudresourcemanager.googleapis.com": False})
    reply = _start(cluster, node, job)
    try:
        assert reply["pid"] > 0 and "error" not in reply
        log = Path(reply["log"]).read_text()
        assert "Cloud Resource Manager API has not been used" in log
        assert "tpu.nodes.delete is not proven" in log
    finally:
        os.kill(reply["pid"], signal.SIGTERM)
        wait_for(lambda: cluster.node_names() == [], "the node's deletion")
