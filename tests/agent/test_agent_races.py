"""The agent where two things happen at once: two starts of one attempt, a teardown
with the bucket gone unreadable, a cancel before the script started."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.agent.conftest import Cluster, wait_for
from tests.agent.test_agent import _reap
from tests.agent.test_preflight import DEFAULT_SA
from tpuctl.errors import TpuctlError
from tpuctl.services import jobs


def test_two_starts_during_the_preflight_run_one_agent(cluster: Cluster) -> None:
    """A start retried while the first is still in its preflight (held there by a slow
    Resource Manager) answers the first one's agent and starts none of its own."""
    node = cluster.create_node("twice")
    job = cluster.stage({"train.py": "print('the script ran', flush=True)\n"}, node,
                        teardown=True)  # fmt: skip
    worker = cluster.worker(node, 0)
    cluster.emulator.faults(delay=2.0)  # every API call; the preflight makes one
    replies, pids = [], []
    try:
        starts = [worker.popen("start", job, cluster.bucket.name) for _ in range(2)]
        for proc in starts:  # both at once: a start reads its stdin to the end first
            proc.stdin.write("{}")
            proc.stdin.close()
        for proc in starts:
            out, err = proc.stdout.read(), proc.stderr.read()
            assert proc.wait(timeout=60) == 0, err
            replies.append(json.loads(out.strip().splitlines()[-1]))
        pids = sorted({r["pid"] for r in replies})
        assert len(pids) == 1 and pids[0] > 0, replies
        assert sum(1 for r in replies if r.get("already_started")) == 1
        cluster.emulator.faults()
        wait_for(lambda: cluster.node_names() == [], "the node's deletion")
        status = cluster.status(job)
        assert status["state"] == "SUCCEEDED" and status["pid"] == pids[0]
        assert Path(replies[0]["log"]).read_text().count("the script ran\n") == 1
    finally:
        cluster.emulator.faults()
        for pid in {r["pid"] for r in replies if r["pid"]}:
            _reap(pid, cluster.status(job))


def _deny(cluster: Cluster, *permissions: str) -> None:
    cluster.emulator.config(
        service_accounts={DEFAULT_SA: {"denied_permissions": list(permissions)}}
    )


def test_a_teardown_blind_to_the_bucket_deletes_the_node_after_the_deadline(
    cluster: Cluster,
) -> None:
    """Worker 0's teardown waits for every worker's final status; with the bucket
    unreadable it cannot see one, and deletes the node anyway once the heartbeat
    deadline (--stale) has passed, saying so in the VM's log."""
    node = cluster.create_node("blind")
    flag = cluster.tmp / "go"
    script = (
        "import pathlib, sys, time\n"
        "print('waiting', flush=True)\n"
        "while not pathlib.Path(sys.argv[1]).exists():\n"
        "    time.sleep(0.05)\n"
    )
    job = cluster.stage({"train.py": script}, node, teardown=True, args=[str(flag)])
    worker = cluster.worker(node, 0)
    proc = worker.popen("run", job, cluster.bucket.name, "--stale", "2")
    proc.stdin.write("{}")
    proc.stdin.close()
    try:
        wait_for(lambda: (s := cluster.status(job)) and s.get("phase") == "script", "RUNNING")
        _deny(cluster, "storage.objects.get")  # the VM can no longer read the statuses
        flag.touch()
        assert proc.wait(timeout=30) == 0  # (without a deadline: never)
        assert cluster.node_names() == []
        log = (worker.root / "jobs" / job / "attempt-1.log").read_text()
        assert (
            "teardown: worker 0's status could not be read for 2s (the heartbeat deadline, "
            "--stale)" in log
        )
        assert "tearing down regardless" in log and "teardown: deleting node blind" in log
    finally:
        cluster.emulator.config(service_accounts={DEFAULT_SA: {"denied_permissions": []}})
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_job_cancelled_before_its_agent_started_never_runs_its_script(
    cluster: Cluster,
) -> None:
    """`tpuctl cancel` of a job no agent has started (PENDING) leaves the job's cancel
    marker: the agent that starts later runs neither the setup nor the script, ends
    CANCELLED, and worker 0 deletes the node made for the job."""
    node = cluster.create_node("early")
    job = cluster.stage({"train.py": "print('the script ran', flush=True)\n"}, node,
                        teardown=True, setup="echo the setup ran")  # fmt: skip
    done = jobs.cancel(cluster.bucket, job)
    assert (done.state, done.asked, done.marked, done.teardown) == ("PENDING", 0, True, True)
    worker = cluster.worker(node, 0)
    result = worker.run(job, cluster.bucket.name)
    assert result.returncode == 1, result.stderr
    status = cluster.status(job)
    assert (status["state"], status["exit_status"]) == ("CANCELLED", None)
    assert status["message"] == "the job was cancelled before its setup started"
    log = (worker.root / "jobs" / job / "attempt-1.log").read_text()
    assert "ran" not in log.replace("nothing ran", "")
    assert "tpuctl-agent: teardown: deleting node early" in log
    assert cluster.node_names() == []
    again = jobs.cancel(cluster.bucket, job)  # the job has ended now: nothing to do
    assert (again.state, again.asked, again.marked) == ("CANCELLED", 0, False)


def test_a_cancel_whose_write_fails_is_an_error_naming_the_job(cluster: Cluster) -> None:
    node = cluster.create_node("denied")
    job = cluster.stage({"train.py": "print('hi')\n"}, node)
    cluster.emulator.config(denied_permissions=["storage.objects.create"])
    with pytest.raises(TpuctlError, match=f"could not cancel job {job}: writing its cancel marker"):
        jobs.cancel(cluster.bucket, job)
