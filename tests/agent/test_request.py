"""What a VM runs is exactly what the user submitted: the agent checks the job's request
against the digest its start was given, and every code file against its sha256, before
anything runs; a mismatch is refused, said in the log and the status, and the attempt
ends FAILED with its usual teardown (protocol.py, "the request")."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tests.agent.conftest import Cluster
from tests.attack import REWRITE
from tpuctl.agent import protocol

HELLO = "print('the job as submitted')\n"


def _log(cluster: Cluster, job: str, attempt: int = 1) -> str:
    return cluster.text(f"tpuctl/jobs/{job}/logs/attempt-{attempt}/worker-0.log")


def test_a_request_rewritten_by_another_job_between_attempts_is_refused(
    cluster: Cluster, tmp_path: Path
) -> None:
    victim_node, other_node = cluster.create_node("victim"), cluster.create_node("other")
    victim = cluster.stage({"train.py": HELLO}, victim_node)
    worker = cluster.worker(victim_node, 0)
    assert worker.run(victim, cluster.bucket.name).returncode == 0
    marker = tmp_path / "pwned"
    attack = cluster.stage(
        {"train.py": REWRITE},
        other_node,
        args=[cluster.bucket.name, victim, str(marker), "exit"],
    )
    done = cluster.worker(other_node, 0).run(attack, cluster.bucket.name)
    assert done.returncode == 0, done.stderr
    assert "rewrote" in _log(cluster, attack)  # the bucket let job A write job B's objects

    # job A's script, on A's VM with A's service account, rewrote job B's request and
    # record (every job VM may write under tpuctl/jobs/)
    again = worker.run(victim, cluster.bucket.name, "--attempt", "2")
    assert again.returncode == 1
    assert not marker.exists()  # job A's setup never ran under job B's account
    status = cluster.status(victim)
    assert status and (status["state"], status["attempt"]) == ("FAILED", 2)
    assert status["message"].startswith("refused: the request in the bucket")
    assert "is not the one submitted" in status["message"]
    log = _log(cluster, victim, 2)
    assert "tpuctl-agent: refused: the request in the bucket" in log
    assert "the job as submitted" not in log and "setup:" not in log


def test_a_swapped_code_file_is_refused_and_the_node_torn_down(cluster: Cluster) -> None:
    node = cluster.create_node("swapped")
    job = cluster.stage({"train.py": HELLO, "lib.py": "X = 1\n"}, node, teardown=True)
    entry = cluster.request(job)["manifest"]["lib.py"]
    cluster.bucket.upload_bytes(protocol.blob_path(entry["sha256"]), b"import os  # not X\n")
    assert cluster.worker(node, 0).run(job, cluster.bucket.name).returncode == 1
    status = cluster.status(job)
    assert status and status["state"] == "FAILED" and status["exit_status"] is None
    assert status["message"].startswith("refused: the code file lib.py is not the one submitted")
    log = _log(cluster, job)
    assert "the job as submitted" not in log
    assert "teardown: deleting node swapped" in log
    assert cluster.node_names() == []  # refused, then torn down as any failed attempt


def test_modes_are_masked_to_0755_and_0644(cluster: Cluster) -> None:
    node = cluster.create_node("modes")
    staged = cluster.stage({"train.py": HELLO, "a.sh": "#!/bin/sh\n", "b.txt": "b\n"}, node)
    request = cluster.request(staged)
    request["manifest"]["a.sh"]["mode"] = 0o4777  # setuid, writable by all
    request["manifest"]["b.txt"]["mode"] = 0o666
    request["manifest"]["train.py"]["mode"] = 0o777
    job = cluster.submit(request)  # as submitted: the digest matches
    worker = cluster.worker(node, 0)
    assert worker.run(job, cluster.bucket.name).returncode == 0
    code = worker.root / "jobs" / job / "code"
    modes = {name: stat.S_IMODE(os.stat(code / name).st_mode) for name in request["manifest"]}
    assert modes == {"a.sh": 0o755, "b.txt": 0o644, "train.py": 0o755}


def test_no_digest_or_an_old_format_job_is_refused_saying_why(cluster: Cluster) -> None:
    node = cluster.create_node("old")
    job = cluster.stage({"train.py": HELLO}, node)
    worker = cluster.worker(node, 0)
    assert worker.run(job, cluster.bucket.name, "--digest", "").returncode == 1
    status = cluster.status(job)
    assert status and "no request digest was given to the agent" in status["message"]
    # a job staged before requests had an object of their own: its record held the code
    cluster.bucket.delete(protocol.request_path(job))
    assert worker.run(job, cluster.bucket.name, "--attempt", "2").returncode == 1
    status = cluster.status(job)
    assert status and status["state"] == "FAILED"
    assert f"job {job} has no request ({protocol.request_path(job)})" in status["message"]
    assert "submitted by an older tpuctl" in status["message"]
    assert "the job as submitted" not in _log(cluster, job, 2)
