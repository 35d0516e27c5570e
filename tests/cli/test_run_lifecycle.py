"""tpuctl run: the life of a job on every path (issue 17): the boot guard, a dead agent,
a job that fails, Ctrl-C while the node is made, job records that always end, bad replies."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import time
from pathlib import Path

import pytest

from tests.cli.conftest import one_line_error
from tests.cli.test_run import (
    _running,
    _wait_running,
    bucket_names,
    bucket_objects,
    bundle_processes,
    project,
    wait_for,
)
from tests.emulator.ssh_helpers import inner_pids
from tpuctl.errors import SshError
from tpuctl.services.run import agents

__all__ = ["project"]  # the fixture, shared


def _guard_log(emulator_server, emulator) -> str:  # noqa: ANN001
    """The boot guard's log on worker 0 of the job's node ('' until there is one)."""
    from tpuctl.emulator.core.errors import ApiError

    nodes = emulator.nodes()
    if not nodes:
        return ""
    try:  # the node may go between the list and this read (its guard deletes it)
        home = Path(emulator_server.backend.worker_env(nodes[0]["name"], 0)["HOME"])
    except ApiError:
        return ""
    try:
        return (home / ".tpuctl" / "start-guard.log").read_text()
    except OSError:
        return ""


def test_a_node_whose_agents_never_start_deletes_itself(emulator, project) -> None:
    """SIGKILL of the client after the node is READY and before the agents start: the
    node's boot guard deletes it after its start deadline."""
    # The VM boots slowly: the client waits for host keys, before any agent starts.
    emulator.durations(hostkeys=3600)
    with _running(project / "job.py", "--start-deadline", "2s") as proc:
        wait_for(lambda: any("getGuestAttributes" in k for k in emulator.requests()))
        assert [n["state"] for n in emulator.nodes()] == ["READY"]
        labels = emulator.nodes()[0]["labels"]
        assert int(labels["tpuctl-start-deadline"]) == int(labels["tpuctl-created"]) + 2
        assert int(labels["tpuctl-expires"]) == int(labels["tpuctl-created"]) + 7 * 86400
        proc.kill()  # no cleanup of any kind on this side
        proc.communicate(timeout=30)
        wait_for(lambda: emulator.nodes() == [], timeout=60)


def test_the_boot_guard_leaves_a_node_whose_agent_started(emulator_server, cli, emulator, project):
    r = cli("run", str(project / "job.py"), "--detach", "--json", "--start-deadline", "30s",
            "--env", "NAP=60")  # fmt: skip
    assert r.code == 0, r.err
    job = json.loads(r.out)["job"]
    wait_for(lambda: "an agent started" in _guard_log(emulator_server, emulator))
    assert f"job {job} attempt 1:" in _guard_log(emulator_server, emulator)
    assert cli("cancel", job).code == 0
    wait_for(lambda: emulator.nodes() == [])


def _statuses(emulator) -> dict[str, dict]:  # noqa: ANN001
    """The job's status objects in the bucket, by name."""
    return {
        k: json.loads(v) for k, v in bucket_objects(emulator, lambda k: "/status/" in k).items()
    }


def _job_id(emulator) -> str:  # noqa: ANN001
    (job,) = {k.split("/")[2] for k in _statuses(emulator)}
    return job


def _agent_pids(job_id: str, worker: int) -> dict[int, int]:
    """The processes of one worker's agent (its supervisor and the agent): {pid as the
    worker numbers it (what its status says): pid on this machine}."""
    found = []
    for pid, argv in bundle_processes():
        flags = dict(zip(argv, argv[1:], strict=False))
        if flags.get("--job-id") == job_id and flags.get("--worker") == str(worker):
            found.append(pid)
    return inner_pids(found)


def _kill_agent(emulator, job_id: str, worker: int) -> None:  # noqa: ANN001
    """SIGKILL the supervisor, then the agent: nothing of it writes its status again."""
    status = _statuses(emulator)[f"tpuctl/jobs/{job_id}/status/worker-{worker}.json"]
    pids = _agent_pids(job_id, worker)
    assert status["pid"] in pids and status["agent_pid"] in pids
    for pid in (status["pid"], status["agent_pid"]):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pids[pid], signal.SIGKILL)


def test_a_dead_agent_is_lost_after_the_heartbeat_deadline(emulator, project) -> None:
    with _running(project / "job.py", "--env", "NAP=60", "--heartbeat-deadline", "3s") as proc:
        _wait_running(emulator)
        job = _job_id(emulator)
        _kill_agent(emulator, job, 0)
        out, err = proc.communicate(timeout=90)
    assert proc.returncode == 1, err
    assert "the agent of worker 0 is lost: no heartbeat for" in err
    assert f"error: job {job} is LOST: the agent of worker 0 stopped answering" in err
    assert "w0 LOST" in err and "Traceback" not in err
    assert emulator.nodes() == []
    (status,) = _statuses(emulator).values()
    assert status["state"] == "LOST"


def test_an_agent_killed_under_its_supervisor_is_reported_at_once(emulator, project) -> None:
    # The heartbeat deadline (2 min) is far: what ends the job is the supervisor's status.
    with _running(project / "job.py", "--env", "NAP=60", "--heartbeat-deadline", "2m") as proc:
        _wait_running(emulator)
        (status,) = _statuses(emulator).values()
        os.kill(_agent_pids(_job_id(emulator), 0)[status["agent_pid"]], signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert "w0 LOST: the agent was killed by SIGKILL" in err
    assert emulator.nodes() == []


def test_worker_0_ends_a_job_whose_peer_is_lost_with_no_client(cli, emulator, project) -> None:
    r = cli("run", str(project / "job.py"), "-a", "v3-32", "--detach", "--json",
            "--heartbeat-deadline", "3s", "--env", "NAP=60")  # fmt: skip
    assert r.code == 0, r.err
    job = json.loads(r.out)["job"]

    def all_running() -> bool:
        states = [s.get("phase") for s in _statuses(emulator).values()]
        return states == ["script"] * 4

    wait_for(all_running)
    _kill_agent(emulator, job, 2)
    wait_for(lambda: emulator.nodes() == [], timeout=90)
    states = {s["worker"]: s["state"] for s in _statuses(emulator).values()}
    assert states[2] == "LOST" and states[0] == "CANCELLED", states
    (row,) = [x for x in json.loads(cli("jobs", "--json").out) if x["id"] == job]
    assert row["state"] == "LOST"


def test_ctrl_c_after_a_dead_agent_is_quick_and_claims_nothing(emulator, project) -> None:
    with _running(project / "job.py", "--env", "NAP=60") as proc:
        _wait_running(emulator)
        _kill_agent(emulator, _job_id(emulator), 0)
        began = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=90)
    assert proc.returncode == 130, err
    assert time.monotonic() - began < 40  # not the 60 s grace plus 60 s for the agent
    assert "will be deleted by its agent" not in err
    assert "deleted its node" in err and "Traceback" not in err
    assert emulator.nodes() == []


def test_a_script_that_is_not_executable_is_refused_before_any_node(cli, emulator, project):
    script = project / "job.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(stat.S_IRUSR | stat.S_IWUSR)
    r = cli("run", str(script))
    assert r.code == 2
    assert "script job.sh is not executable" in one_line_error(r)
    assert emulator.nodes() == [] and emulator.requests().get("POST create", 0) == 0


def test_run_uses_the_config_files_bucket(cli, emulator, project, isolated_env) -> None:
    config = Path(os.environ["TPUCTL_CONFIG"])
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('bucket = "gs://from-config"\n')
    r = cli("run", str(project / "job.py"), "--json")
    assert r.code == 0, r.err
    job = json.loads(r.out)["job"]
    assert "gs://from-config/" in r.err
    rows = json.loads(cli("jobs", "--json").out)  # jobs reads the same bucket
    assert [x["id"] for x in rows] == [job]


@pytest.mark.parametrize(
    "out", [b"", b"Welcome to the VM!\n", b'{"pid": "x"}\n', b"[1, 2]\n", b"\xff\xfe\n"]
)
def test_a_malformed_start_reply_is_an_ssh_failure(out: bytes) -> None:
    with pytest.raises(SshError, match="10.0.0.2: the agent's start answered"):
        agents.start_reply("10.0.0.2", out)
    reply = agents.start_reply("h", b'motd\n{"pid": 42, "log": "/l", "agent_log": "/a"}\n')
    assert reply["pid"] == 42 and reply["log"] == "/l"


def test_a_run_interrupted_while_its_node_is_created_ends_its_job(cli, emulator, project):
    emulator.durations(create=None)  # the node stays CREATING
    with _running(project / "job.py") as proc:
        wait_for(lambda: any(k.endswith("/job.json") for k in bucket_names(emulator)))
        wait_for(lambda: [n["state"] for n in emulator.nodes()] == ["CREATING"])
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    (job,) = {k.split("/")[2] for k in bucket_names(emulator) if k.endswith("/job.json")}
    assert f"interrupted before job {job} started; node tpuctl-{job} " in err
    assert "was deleted" in err and "stopped job" not in err
    assert emulator.nodes() == []
    (row,) = json.loads(cli("jobs", "--json").out)
    assert row["state"] == "CANCELLED"
    assert "already CANCELLED: nothing to stop" in cli("cancel", job).err


def test_a_job_cancelled_while_its_node_is_created_never_runs(cli, emulator, project):
    """`tpuctl cancel` while the run still waits for its node (the job PENDING): the
    agents that start once the node is READY run nothing, the run ends CANCELLED, and
    the node made for the job is deleted."""
    emulator.durations(create=None)  # the node stays CREATING until advanced
    with _running(project / "job.py") as proc:
        wait_for(lambda: any(k.endswith("/job.json") for k in bucket_names(emulator)))
        (job,) = {k.split("/")[2] for k in bucket_names(emulator) if k.endswith("/job.json")}
        r = cli("cancel", job)
        assert r.code == 0, r.err
        assert (
            f"job {job} is PENDING: cancelled before it started, its script will not run; "
            "the node made for it is deleted" in r.err
        )
        emulator.advance()
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert "CANCELLED" in err and "the job was cancelled before its script started" in err
    assert "worker 0 of 1 job" not in err  # the script's first line
    assert emulator.nodes() == []
    (row,) = json.loads(cli("jobs", "--json").out)
    assert row["state"] == "CANCELLED"
    assert "already CANCELLED: nothing to stop" in cli("cancel", job).err


def test_cancel_says_what_it_found(cli, emulator, project) -> None:
    r = cli("run", str(project / "job.py"), "--json")
    job = json.loads(r.out)["job"]
    r = cli("cancel", job)
    assert r.code == 0 and f"job {job} is already SUCCEEDED: nothing to stop" in r.err
    r = cli("cancel", "20200101-000000-abcdef")
    assert r.code == 4
    assert "no job 20200101-000000-abcdef in gs://tpuctl-demo-tpuctl/" in one_line_error(r)
