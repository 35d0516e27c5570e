"""The agent against the emulator, as a real process with only the env overrides."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import tpuctl.agent.streams as streams
from tests.agent.conftest import PROJECT, Cluster, trust, wait_for
from tpuctl.agent import protocol
from tpuctl.agent.protocol import FINAL

TRAIN = """\
import os, pathlib, sys
out = pathlib.Path(os.environ["TPUCTL_OUTPUT_DIR"])
print("worker", os.environ["TPUCTL_WORKER_ID"], "of", os.environ["TPUCTL_NUM_WORKERS"])
print("job", os.environ["TPUCTL_JOB_ID"], "restart", os.environ["TPUCTL_RESTART"])
print("args", sys.argv[1:])
print("greeting", os.environ.get("GREETING"))
previous = (out / "steps.txt").read_text() if (out / "steps.txt").exists() else ""
(out / "steps.txt").write_text(previous + "step\\n")
(out / "ckpt").mkdir(exist_ok=True)
(out / "ckpt" / "w.bin").write_bytes(b"w" * 10)
print("helper", open("pkg/helper.txt").read().strip())
sys.exit(int(os.environ.get("EXIT", "0")))
"""
FILES = {"train.py": TRAIN, "pkg/helper.txt": "from the work dir\n", "run.sh": "#!/bin/sh\n"}


def test_a_run_fetches_runs_reports_and_tears_down(cluster: Cluster) -> None:
    node = cluster.create_node("solo")
    job = cluster.stage(FILES, node, args=["a b", "--q='x'"], env_names=["GREETING"], teardown=True)
    worker = cluster.worker(node, 0)
    done = worker.run(job, cluster.bucket.name, env_values={"GREETING": "hello there"})
    assert done.returncode == 0, done.stderr

    status = cluster.status(job)
    assert status and status["state"] == "SUCCEEDED" and status["exit_status"] == 0
    assert status["attempt"] == 1 and status["worker"] == 0 and status["heartbeat"] > 0
    log = cluster.text(f"tpuctl/jobs/{job}/logs/attempt-1/worker-0.log")
    assert "worker 0 of 1\n" in log and f"job {job} restart 0\n" in log
    assert "args ['a b', \"--q='x'\"]\n" in log and "greeting hello there\n" in log
    assert "helper from the work dir\n" in log
    assert "teardown: deleting node solo" in log
    assert cluster.text(f"tpuctl/jobs/{job}/outputs/steps.txt") == "step\n"
    assert cluster.text(f"tpuctl/jobs/{job}/outputs/ckpt/w.bin") == "w" * 10
    code = worker.root / "jobs" / job / "code"
    assert (code / "pkg" / "helper.txt").read_text() == "from the work dir\n"
    assert os.access(code / "run.sh", os.X_OK) and not os.access(code / "train.py", os.X_OK)
    assert cluster.node_names() == []  # the agent deleted its own node through the TPU API
    assert status.get("teardown") or cluster.status(job)["teardown"].startswith("projects/")
    assert cluster.emulator.requests()["GET metadata.token"] == 1  # cached for the whole run


def test_failure_is_reported_and_node_kept_without_teardown(cluster: Cluster) -> None:
    node = cluster.create_node("kept")
    job = cluster.stage(FILES, node, env_names=["EXIT"], teardown=False)
    done = cluster.worker(node, 0).run(job, cluster.bucket.name, env_values={"EXIT": "3"})
    assert done.returncode == 3
    status = cluster.status(job)
    assert status and (status["state"], status["exit_status"]) == ("FAILED", 3)
    assert "teardown" not in status
    assert cluster.node_names() == [node]


def test_failed_setup_skips_the_script(cluster: Cluster) -> None:
    node = cluster.create_node("setup")
    job = cluster.stage(FILES, node, setup="echo preparing; exit 7", teardown=True)
    done = cluster.worker(node, 0).run(job, cluster.bucket.name)
    assert done.returncode == 7
    log = cluster.text(f"tpuctl/jobs/{job}/logs/attempt-1/worker-0.log")
    assert "preparing\n" in log and "the setup failed with exit status 7" in log
    assert "worker 0 of" not in log
    assert cluster.status(job)["state"] == "FAILED"
    assert cluster.node_names() == []  # teardown on failure too


def test_executable_script_and_unsafe_manifest(cluster: Cluster) -> None:
    node = cluster.create_node("exe")
    script = '#!/bin/sh\necho from sh "$1"\n'
    job = cluster.stage({"bin/go.sh": script}, node, script="bin/go.sh", args=["x y"])
    assert cluster.worker(node, 0).run(job, cluster.bucket.name).returncode == 0
    assert "from sh x y\n" in cluster.text(f"tpuctl/jobs/{job}/logs/attempt-1/worker-0.log")

    request = cluster.request(job)
    request["manifest"] = {"../escape.py": next(iter(request["manifest"].values()))}
    evil = cluster.submit(request)  # even as submitted, such a path is refused
    worker = cluster.worker(node, 0)
    assert worker.run(evil, cluster.bucket.name).returncode == 1
    status = cluster.status(evil)
    assert status["state"] == "FAILED" and "unsafe path" in status["message"]
    assert not (worker.root / "jobs" / evil / "escape.py").exists()


def test_restart_restores_outputs_and_uploads_only_changes(cluster: Cluster) -> None:
    node = cluster.create_node("again")
    job = cluster.stage(FILES, node)
    worker = cluster.worker(node, 0)
    assert worker.run(job, cluster.bucket.name).returncode == 0
    first = {o.name: o.generation for o in cluster.bucket.objects(f"tpuctl/jobs/{job}/outputs/")}
    import shutil

    shutil.rmtree(worker.root)  # a fresh VM: nothing local survives
    worker.root.mkdir()
    assert worker.run(job, cluster.bucket.name, "--attempt", "2").returncode == 0
    log = cluster.text(f"tpuctl/jobs/{job}/logs/attempt-2/worker-0.log")
    assert f"job {job} restart 1\n" in log
    assert cluster.text(f"tpuctl/jobs/{job}/outputs/steps.txt") == "step\nstep\n"
    second = {o.name: o.generation for o in cluster.bucket.objects(f"tpuctl/jobs/{job}/outputs/")}
    ckpt = f"tpuctl/jobs/{job}/outputs/ckpt/w.bin"
    assert second[ckpt] == first[ckpt]  # same content: not uploaded again


def test_a_four_worker_slice_tears_down_after_the_last_worker(cluster: Cluster) -> None:
    node = cluster.create_node("slice", "v4-32", "us-central2-b")
    job = cluster.stage(FILES, node, workers=4, env_names=["EXIT"], teardown=True)
    workers = [cluster.worker(node, k) for k in range(4)]
    procs = [w.popen("run", job, cluster.bucket.name) for w in workers[:3]]
    try:
        for k, proc in enumerate(procs):
            assert proc.stdin is not None
            proc.stdin.write(json.dumps({"EXIT": str(k)}))
            proc.stdin.close()
        assert [p.wait(timeout=60) for p in procs[1:]] == [1, 2]
        wait_for(lambda: cluster.status(job, 0)["state"] == "SUCCEEDED", "worker 0's end")
        assert procs[0].poll() is None  # worker 0 waits for worker 3 before tearing down
        assert cluster.node_names() == [node]
        assert workers[3].run(job, cluster.bucket.name).returncode == 0
        assert procs[0].wait(timeout=30) == 0
        assert cluster.node_names() == []
        log = cluster.text(f"tpuctl/jobs/{job}/logs/attempt-1/worker-2.log")
        assert "worker 2 of 4\n" in log
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_start_detaches_and_a_signal_cancels(cluster: Cluster) -> None:
    node = cluster.create_node("bg")
    sleeper = "import time\nprint('started', flush=True)\ntime.sleep(600)\n"
    job, info = _start_detached(cluster, node, sleeper)
    pid = info["pid"]
    try:
        running = wait_for(
            lambda: (s := cluster.status(job)) and s.get("phase") == "script" and s, "RUNNING"
        )
        assert running["pid"] == pid and os.getsid(pid) != os.getsid(0)  # not our session
        # A second start of the same attempt (a retry after a dropped connection) reports
        # the running agent instead of starting another one.
        again = cluster.worker(node, 0).popen("start", job, cluster.bucket.name)
        out2, err2 = again.communicate("{}", timeout=30)
        assert again.returncode == 0, err2
        assert json.loads(out2)["pid"] == pid
        os.kill(pid, signal.SIGTERM)
        final = wait_for(lambda: (s := cluster.status(job)) and s["state"] in FINAL and s, "end")
        assert (final["state"], final["exit_status"]) == ("CANCELLED", 128 + signal.SIGTERM)
        wait_for(lambda: cluster.node_names() == [], "the node's deletion")
        assert "started\n" in Path(info["log"]).read_text()
    finally:
        _reap(pid, cluster.status(job))


def test_a_cancel_written_to_the_status_stops_the_job(cluster: Cluster) -> None:
    node = cluster.create_node("cancel")
    sleeper = "import time\ntime.sleep(600)\n"
    job = cluster.stage({"train.py": sleeper}, node)
    proc = cluster.worker(node, 0).popen("run", job, cluster.bucket.name)
    proc.stdin.write("{}")
    proc.stdin.close()
    try:
        status_name = f"tpuctl/jobs/{job}/status/worker-0.json"
        wait_for(lambda: (s := cluster.status(job)) and s.get("phase") == "script", "RUNNING")

        def ask() -> None:  # what the runner does: a conditional read-modify-write
            cluster.bucket.update_json(status_name, lambda v: {**v, "cancel": True})

        ask()
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM
        assert cluster.status(job)["state"] == "CANCELLED"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        _reap(proc.pid, cluster.status(job))


def _start_detached(cluster: Cluster, node: str, script: str) -> tuple[str, dict]:
    """Stage `script` with teardown and `agent start` it on worker 0: (job id, what
    start printed: pid, log, agent_log)."""
    job = cluster.stage({"train.py": script}, node, teardown=True)
    started = cluster.worker(node, 0).popen("start", job, cluster.bucket.name)
    out, err = started.communicate("{}", timeout=30)
    assert started.returncode == 0, err
    return job, json.loads(out)


def _reap(pid: int, status: dict | None) -> None:
    """Make sure an agent and its script are gone, whatever the test did: the agent may
    not be our child (poll it), and the script leads a process group of its own."""
    try:
        wait_for(lambda: not _alive(pid), "the agent to exit", timeout=30)
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
        child = (status or {}).get("child_pid")
        if child and _alive(child):
            os.killpg(child, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_a_large_output_goes_by_resumable_upload(cluster: Cluster) -> None:
    node = cluster.create_node("big")
    size = streams.MULTIPART_LIMIT + 12345
    writer = (
        "import os\n"
        "out = os.path.join(os.environ['TPUCTL_OUTPUT_DIR'], 'big.bin')\n"
        f"open(out, 'wb').write(b'z' * {size})\n"
    )
    job = cluster.stage({"train.py": writer}, node)
    assert cluster.worker(node, 0).run(job, cluster.bucket.name).returncode == 0
    data, _ = cluster.bucket.read_bytes(f"tpuctl/jobs/{job}/outputs/big.bin", 1 << 30)
    assert data == b"z" * size


# A job that writes an output at once, then waits for the test's word (a file) to end.
LONG = """\
import os, pathlib, time
out = pathlib.Path(os.environ["TPUCTL_OUTPUT_DIR"])
(out / "config.json").write_text("{}")
while not os.path.exists(os.environ["GO"]):
    time.sleep(0.05)
"""


def test_a_job_outliving_the_retention_rule_keeps_its_record_and_outputs(
    cluster: Cluster, tmp_path: Path
) -> None:
    """`tpuctl init`'s lifecycle rule deletes job objects N days old; a job running
    longer writes its record again (from its own copy once the rule took it) and uploads
    again the outputs the bucket lost, so a restart and the teardown still find them."""
    node = cluster.create_node("long")
    job = cluster.stage({"train.py": LONG}, node, env_names=["GO"], teardown=True)
    go = tmp_path / "go"
    proc = cluster.worker(node, 0).popen("run", job, cluster.bucket.name, "--refresh-every", "0.3")
    assert proc.stdin is not None
    proc.stdin.write(json.dumps({"GO": str(go), protocol.TRUST: trust(job)}))
    proc.stdin.close()
    record_name = f"tpuctl/jobs/{job}/job.json"
    output = f"tpuctl/jobs/{job}/outputs/config.json"
    manifest = f"tpuctl/jobs/{job}/manifests/slice-0/worker-0.json"  # what a restart trusts

    def names() -> set[str]:
        return {o.name for o in cluster.bucket.objects(f"tpuctl/jobs/{job}/")}

    try:
        record = cluster.bucket.read_json(record_name)[0]
        wait_for(lambda: {output, manifest} <= names(), "the output's first sync")
        cluster.bucket.add_delete_rule("tpuctl/jobs/", 1)
        deleted = cluster.emulator.run_lifecycle(2)["deleted"][cluster.bucket.name]
        assert {record_name, output, manifest} <= set(deleted)  # as Cloud Storage would
        wait_for(lambda: record_name in names(), "the record written again")
        assert cluster.bucket.read_json(record_name)[0] == record
        wait_for(lambda: output in names(), "the output uploaded again")
        wait_for(lambda: manifest in names(), "the manifest written again")
        go.touch()
        assert proc.wait(timeout=30) == 0
    finally:
        go.touch()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert cluster.node_names() == []  # torn down: the record said so
    log = cluster.text(f"tpuctl/jobs/{job}/logs/attempt-1/worker-0.log")
    assert "job record was gone from the bucket" in log
    assert "1 output file(s) were gone from the bucket" in log


def test_the_supervisor_tears_down_from_its_copy_of_a_deleted_record(cluster: Cluster) -> None:
    """The agent killed after a lifecycle rule took the record (and before it wrote it
    again): the supervisor still owes the teardown, and reads it from the VM's copy."""
    node = cluster.create_node("orphan")
    job, info = _start_detached(cluster, node, "import time\ntime.sleep(600)\n")
    pid = info["pid"]
    status = None
    try:
        # the status says the phase before the script starts and its pid once it has:
        # `_reap` needs the pid to end the script, which would outlive the test otherwise
        status = wait_for(
            lambda: (
                (s := cluster.status(job))
                and s.get("phase") == "script"
                and s.get("child_pid")
                and s
            ),
            "RUNNING, the script's pid known",
        )
        cluster.bucket.delete(f"tpuctl/jobs/{job}/job.json")
        os.kill(status["agent_pid"], signal.SIGKILL)
        final = wait_for(
            lambda: (s := cluster.status(job)) and "teardown" in s and s, "the supervisor's end"
        )
        assert final["state"] == "LOST" and final["teardown"].startswith("projects/")
        wait_for(lambda: cluster.node_names() == [], "the node's deletion")
    finally:
        _reap(pid, status)


def test_after_a_preemption_the_log_says_once_who_deletes_the_node(cluster: Cluster) -> None:
    from google.cloud import tpu_v2

    parent = f"projects/{PROJECT}/locations/us-central1-a"
    spot = tpu_v2.Node(accelerator_type="v3-8", runtime_version="tpu-ubuntu2204-base",
                       scheduling_config=tpu_v2.SchedulingConfig(spot=True))  # fmt: skip
    cluster.emulator.tpu_client().create_node(parent=parent, node_id="spot", node=spot).result(10)
    node = f"{parent}/nodes/spot"
    sleeper = "import time\nprint('started', flush=True)\ntime.sleep(600)\n"
    job, info = _start_detached(cluster, node, sleeper)
    try:
        wait_for(lambda: (s := cluster.status(job)) and s.get("phase") == "script", "RUNNING")
        cluster.emulator.preempt(node, notice=5)
        wait_for(lambda: cluster.node_names() == [], "the node's deletion")
        log = Path(info["log"]).read_text()
        assert "preemption notice" in log
        assert "left to the runner" not in log  # the agent's supervisor deletes it
        said = log.index("preempted: the node is deleted once this agent has ended")
        assert log.index("teardown: deleting node spot in us-central1-a") > said
    finally:
        _reap(info["pid"], cluster.status(job))
