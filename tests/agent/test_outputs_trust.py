"""What an attempt finds in TPUCTL_OUTPUT_DIR (outputs.py): on the first attempt nothing,
whatever the bucket holds; on a later one only the files an earlier attempt of the job
uploaded, with the content it uploaded, by the manifests signed with the job's own key.
A checkpoint planted or replaced by another writer of the bucket is never restored: a
script that resumes from it (pickle) would run the writer's code."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
from pathlib import Path

from tests.agent.conftest import CLIENT_KEY, Cluster, Worker
from tpuctl.agent import signing

RESUME = """\
import os, pathlib, pickle
ckpt = pathlib.Path(os.environ["TPUCTL_OUTPUT_DIR"]) / "ckpt.pkl"
state = pickle.loads(ckpt.read_bytes()) if ckpt.exists() else {"step": 0}
print("resumed from step", state["step"], "found", sorted(os.listdir(ckpt.parent)), flush=True)
state["step"] += 1
ckpt.write_bytes(pickle.dumps(state))
"""


class Planted:
    """A pickle that runs `touch MARKER` when it is loaded."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (os.system, (f"touch {self.marker}",))


def _attempt(cluster: Cluster, worker: Worker, job: str, attempt: int) -> str:
    """Attempt `attempt` of `job` on a VM of its own (the worker's disk wiped first):
    what its log says."""
    shutil.rmtree(worker.root / "jobs" / job, ignore_errors=True)
    done = worker.run(job, cluster.bucket.name, "--attempt", str(attempt))
    assert done.returncode == 0, done.stderr
    return cluster.text(f"tpuctl/jobs/{job}/logs/attempt-{attempt}/worker-0.log")


def _plant_checkpoint(cluster: Cluster, job: str, marker: Path, worker: int, key: str) -> None:
    """As another writer may: a checkpoint that runs `touch MARKER` when it is loaded, in
    the job's outputs, and worker `worker`'s manifest naming it, signed with `key`."""
    evil = pickle.dumps(Planted(marker))
    cluster.bucket.upload_bytes(f"tpuctl/jobs/{job}/outputs/ckpt.pkl", evil)
    forged = {
        "version": 1,
        "job": job,
        "slice": 0,
        "worker": worker,
        "attempt": 1,
        "files": {"ckpt.pkl": hashlib.sha256(evil).hexdigest()},
    }
    name = f"tpuctl/jobs/{job}/manifests/slice-0/worker-{worker}.json"
    cluster.bucket.upload_bytes(name, json.dumps(signing.sign(forged, key)).encode())


def test_a_checkpoint_planted_before_the_job_never_reaches_its_first_attempt(
    cluster: Cluster, tmp_path: Path
) -> None:
    node = cluster.create_node("first")
    job = cluster.stage({"train.py": RESUME}, node)
    marker = tmp_path / "pwned"
    evil = pickle.dumps(Planted(marker))
    cluster.bucket.upload_bytes(f"tpuctl/jobs/{job}/outputs/ckpt.pkl", evil)
    cluster.bucket.upload_bytes(f"tpuctl/jobs/{job}/outputs/notes.txt", b"planted\n")

    log = _attempt(cluster, cluster.worker(node, 0), job, 1)
    assert "resumed from step 0 found []" in log  # an empty folder, whatever the bucket held
    assert not marker.exists()
    assert pickle.loads(cluster.bucket.read_bytes(f"tpuctl/jobs/{job}/outputs/ckpt.pkl")[0]) == {
        "step": 1
    }  # the job's own checkpoint replaced the planted one
    manifest = json.loads(cluster.text(f"tpuctl/jobs/{job}/manifests/slice-0/worker-0.json"))
    assert sorted(manifest["files"]) == ["ckpt.pkl"]
    assert signing.signed(manifest, signing.job_key(CLIENT_KEY, job))  # the job's own key
    assert not signing.signed(manifest, CLIENT_KEY)


def test_a_later_attempt_restores_only_what_the_job_uploaded(
    cluster: Cluster, tmp_path: Path
) -> None:
    node = cluster.create_node("later")
    job = cluster.stage({"train.py": RESUME}, node)
    worker = cluster.worker(node, 0)
    _attempt(cluster, worker, job, 1)
    cluster.bucket.upload_bytes(f"tpuctl/jobs/{job}/outputs/extra.pkl", b"planted\n")
    log = _attempt(cluster, worker, job, 2)
    assert "resumed from step 1 found ['ckpt.pkl']" in log  # its own checkpoint, only
    assert "1 file(s) in the bucket that no attempt of this job uploaded" in log
    assert "(extra.pkl)" in log

    # Another writer replaces the checkpoint and forges a manifest that names it.
    marker = tmp_path / "pwned"
    _plant_checkpoint(cluster, job, marker, 1, "not the key" * 6)
    log = _attempt(cluster, worker, job, 3)
    assert not marker.exists()  # the planted checkpoint never loaded
    assert "resumed from step 0 found []" in log
    assert "1 file(s) in the bucket changed since this job uploaded them" in log
    assert "1 manifest(s) of this job's outputs are not signed with this job's key" in log


def test_a_manifest_signed_by_another_jobs_agents_is_not_trusted(
    cluster: Cluster, tmp_path: Path
) -> None:
    # Job B's script knows B's key (it may read its agent's memory): it signs a manifest
    # naming job A's checkpoint, with the content it planted, and puts it in A's folder.
    node = cluster.create_node("other")
    job = cluster.stage({"train.py": RESUME}, node)
    other = cluster.stage({"train.py": RESUME}, node)
    worker = cluster.worker(node, 0)
    _attempt(cluster, worker, job, 1)
    marker = tmp_path / "pwned"
    _plant_checkpoint(cluster, job, marker, 0, signing.job_key(CLIENT_KEY, other))
    log = _attempt(cluster, worker, job, 2)
    assert not marker.exists()
    assert "resumed from step 0 found []" in log
    assert "1 manifest(s) of this job's outputs are not signed with this job's key" in log
