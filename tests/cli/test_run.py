"""tpuctl run end to end against the emulator: every exit path leaves no node behind."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.cli.conftest import one_line_error, spawned
from tests.emulator.ssh_helpers import worker_processes
from tpuctl.agent import bundle

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train.py"

SCRIPT = """\
import json, os, sys, time
w = os.environ["TPUCTL_WORKER_ID"]
print("worker", w, "of", os.environ["TPUCTL_NUM_WORKERS"], "job", os.environ["TPUCTL_JOB_ID"])
print("args", json.dumps(sys.argv[1:]))
print("secret", os.environ.get("SECRET"))
out = os.environ["TPUCTL_OUTPUT_DIR"]
open(os.path.join(out, "result-%s.txt" % w), "w").write("done by " + w)
time.sleep(float(os.environ.get("NAP", "0")))
sys.exit(int(os.environ.get("FAIL_ON_" + w, "0")))
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "job.py").write_text(SCRIPT)
    (root / "data.bin").write_bytes(os.urandom(2048))
    return root


def wait_for(predicate, timeout: float = 60.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.2)


def bucket_names(emulator) -> list[str]:  # noqa: ANN001
    """The names of the objects in the default bucket ([] while it does not exist yet)."""
    from google.api_core.exceptions import NotFound

    try:
        return [b.name for b in emulator.storage_client().list_blobs("tpuctl-demo-tpuctl")]
    except NotFound:
        return []


def bucket_objects(emulator, only: Callable[[str], bool] | None = None) -> dict[str, bytes]:  # noqa: ANN001
    """The objects in the default bucket ({} while the bucket does not exist yet); with
    `only`, those whose name it takes (a poll reads a few objects, not every one)."""
    from google.api_core.exceptions import NotFound

    client = emulator.storage_client()
    found = {}
    for name in bucket_names(emulator):  # a status may be rewritten since: read the newest
        if only is not None and not only(name):
            continue
        try:
            found[name] = client.bucket("tpuctl-demo-tpuctl").blob(name).download_as_bytes()
        except NotFound:
            continue  # deleted since
    return found


def test_example_trains_downloads_outputs_and_tears_down(cli, emulator, tmp_path) -> None:
    out = tmp_path / "out"
    r = cli("run", str(EXAMPLE), "-a", "v3-8", "--outputs", str(out), "--", "--steps", "20")
    assert r.code == 0, r.err
    assert "step    10  loss" in r.out and "step    20  loss" in r.out
    assert r.out.index("step    10") < r.out.index("step    20")  # live, in order
    assert "done: loss" in r.out
    metrics = json.loads((out / "metrics-worker0.json").read_text())
    assert metrics["steps"] == 20
    assert "deleted node tpuctl-" in r.err
    assert emulator.nodes() == []


def test_pod_args_env_and_exit_status(cli, emulator, project) -> None:
    args = ["a b", "it's", "$(whoami);echo x", "--flag=1"]
    r = cli(
        "run",
        str(project / "job.py"),
        "-a",
        "v3-32",
        "--env",
        "SECRET=hunter2",
        "--env",
        "FAIL_ON_2=7",
        "--",
        *args,
    )
    assert r.code == 7, r.err
    for w in range(4):
        assert f"[w{w}] worker {w} of 4 job " in r.out
        assert f"[w{w}] args {json.dumps(args)}" in r.out
        assert f"[w{w}] secret hunter2" in r.out
    assert "w2 FAILED" in r.err and "exit status 7" in r.err
    assert emulator.nodes() == []
    # The bucket's records hold env names, never values (the script's own log printed it).
    objects = {k: v for k, v in bucket_objects(emulator).items() if not k.endswith(".log")}
    (record,) = [json.loads(v) for k, v in objects.items() if k.endswith("/job.json")]
    assert sorted(record["env"]) == ["FAIL_ON_2", "SECRET"]
    assert not any(b"hunter2" in v for v in objects.values())


def test_unchanged_second_run_uploads_no_code(cli, emulator, project) -> None:
    first = cli("run", str(project / "job.py"), "--json")
    assert first.code == 0, first.err
    result = json.loads(first.out)  # with --json the logs go to stderr
    assert result["exitStatus"] == 0 and result["states"] == {"0": "SUCCEEDED"}
    assert result["error"] is None  # the exit status is the job's
    assert "worker 0 of 1 job" in first.err
    assert ": 2 files, 2 uploaded" in first.err
    second = cli("run", str(project / "job.py"))
    assert second.code == 0, second.err
    assert ": 2 files, 0 uploaded (0 B)" in second.err
    assert emulator.nodes() == []


def test_with_json_a_failure_of_tpuctl_is_told_from_the_scripts(cli, emulator, project) -> None:
    """A script may exit 5 itself: with --json, `error` says whether tpuctl failed."""
    emulator.capacity({"us-central1-a": {"v3": 0}})
    r = cli("run", str(project / "job.py"), "--json")
    assert r.code == 5, r.err  # no capacity: tpuctl's own exit code
    result = json.loads(r.out)
    assert result["exitStatus"] is None and result["error"]["exitCode"] == 5
    assert "no capacity" in result["error"]["message"]
    assert result["job"] and result["node"] == f"tpuctl-{result['job']}"
    assert emulator.nodes() == []
    r = cli("run", str(project / "nope.py"), "--json")
    assert (r.code, json.loads(r.out)["error"]["exitCode"]) == (2, 2)  # a usage error too


def test_outputs_come_home_by_default_and_later_on_request(cli, emulator, project) -> None:
    r = cli("run", str(project / "job.py"), "--json")
    assert r.code == 0, r.err
    job = json.loads(r.out)["job"]
    home = Path("outputs") / job  # under the directory tpuctl ran in
    assert (home / "result-0.txt").read_text() == "done by 0"
    assert f"downloaded 1 output file(s) to {home}" in r.err
    r = cli("run", str(project / "job.py"), "--no-outputs", "--json")
    assert r.code == 0, r.err
    kept = json.loads(r.out)["job"]
    assert not (Path("outputs") / kept).exists()
    assert f"`tpuctl outputs {kept}` fetches them" in r.err
    fetched = cli("outputs", kept, "later")  # from the bucket, any time after
    assert fetched.code == 0, fetched.err
    assert (Path("later") / "result-0.txt").read_text() == "done by 0"
    bad = cli("run", str(project / "job.py"), "--outputs", "x", "--no-outputs")
    assert bad.code == 2 and "--outputs and --no-outputs are exclusive" in bad.err
    assert emulator.nodes() == []


def test_detach_then_logs_follow_then_jobs(cli, emulator, project) -> None:
    r = cli("run", str(project / "job.py"), "--detach", "--json", "--env", "NAP=1")
    assert r.code == 0, r.err
    job = json.loads(r.out)["job"]
    logs = cli("logs", job, "-f")
    assert logs.code == 0, logs.err
    assert "worker 0 of 1 job " + job in logs.out
    assert "tpuctl-agent: succeeded with exit status 0" in logs.out
    # following it to its end made its receipt (the client had left): `jobs` shows that one
    assert f"job {job}: receipt: " in logs.err and "teardown unknown" in logs.err, logs.err
    wait_for(lambda: emulator.nodes() == [])  # the agent tore it down, nobody watching
    rows = json.loads(cli("jobs", "--json").out)
    (row,) = [x for x in rows if x["id"] == job]
    assert row["state"] == "SUCCEEDED" and row["exitStatus"] == 0
    shown = cli("jobs", job)
    receipt_line = next(line for line in logs.err.splitlines() if "receipt: " in line)
    assert receipt_line.split("receipt: ", 1)[1] in shown.out


def test_cancel_a_detached_job(cli, emulator, project) -> None:
    r = cli("run", str(project / "job.py"), "--detach", "--json", "--env", "NAP=60")
    job = json.loads(r.out)["job"]
    wait_for(lambda: "RUNNING" in cli("jobs").out)
    assert cli("cancel", job).code == 0
    wait_for(lambda: emulator.nodes() == [])
    (row,) = [x for x in json.loads(cli("jobs", "--json").out) if x["id"] == job]
    assert row["state"] == "CANCELLED"


def test_existing_node_is_kept_unless_teardown(cli, emulator, project) -> None:
    assert cli("create", "mine", "-a", "v3-8").code == 0
    r = cli("run", str(project / "job.py"), "--node", "mine")
    assert r.code == 0, r.err
    assert [n["name"].rsplit("/", 1)[1] for n in emulator.nodes()] == ["mine"]
    assert "node mine in us-central1-a keeps running: `tpuctl delete mine --zone" in r.err
    r = cli("run", str(project / "job.py"), "--node", "mine", "--teardown")
    assert r.code == 0, r.err
    assert emulator.nodes() == []


def test_a_node_named_with_node_and_made_for_the_job_is_deleted_after_it(
    cli, emulator, project
) -> None:
    """`--node NAME` uses NAME, or creates it: then, as any node made for a job, it goes
    when the job ends (the help's "default: only a node created for the job")."""
    r = cli("run", str(project / "job.py"), "--node", "fresh")
    assert r.code == 0, r.err
    assert "deleted node fresh" in r.err
    assert emulator.nodes() == []
    r = cli("run", str(project / "job.py"), "--node", "fresh", "--keep")
    assert r.code == 0, r.err
    assert [n["name"].rsplit("/", 1)[1] for n in emulator.nodes()] == ["fresh"]
    assert cli("delete", "fresh", "--yes").code == 0


@pytest.mark.parametrize(
    ("extra", "code", "needle"),
    [
        (["--exclude", "job.py"], 2, "nothing to run from the work dir"),  # fails mid-way
        (["--setup", "exit 4"], 4, "w0 FAILED"),
    ],
)
def test_failures_after_create_still_tear_down(cli, emulator, project, extra, code, needle):
    r = cli("run", str(project / "job.py"), *extra)
    assert r.code == code, r.err
    assert needle in r.err
    assert emulator.nodes() == []


def test_no_capacity_leaves_nothing(cli, emulator, project) -> None:
    emulator.capacity({"us-central1-a": {"v3": 0}})
    r = cli("run", str(project / "job.py"))
    assert r.code == 5
    assert "no capacity" in r.err
    assert emulator.nodes() == []


def test_bad_input(cli, emulator, project) -> None:
    r = cli("run", str(project / "missing.py"))
    assert r.code == 2
    assert "script" in one_line_error(r) and "not found" in r.err
    r = cli("run", str(project / "job.py"), "--env", "NOEQUALS")
    assert r.code == 2
    assert "expected KEY=VALUE" in one_line_error(r)
    assert emulator.nodes() == []


def _spawn(script: Path, *extra: str) -> subprocess.Popen[str]:
    """`tpuctl run SCRIPT EXTRA...` as a real process (for signals and kills)."""
    return subprocess.Popen(
        [sys.executable, "-m", "tpuctl", "run", str(script), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )


def bundle_processes() -> Iterator[tuple[int, list[str]]]:
    """(pid, argv) of the processes on this session's emulated workers that run the agent
    bundle (nothing else on the machine is ours)."""
    name = "/" + bundle.file_name()
    for pid in worker_processes():
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if any(arg.endswith(name) for arg in argv):
            yield pid, argv


def _follows(job_id: str) -> list[tuple[int, Path]]:
    """The job's log followers (the bundle's `follow` on a log of this job): each one's
    pid and the worker log it streams."""
    name = "/" + bundle.file_name()
    return [
        (pid, Path(argv[i + 2]))
        for pid, argv in bundle_processes()
        for i, arg in enumerate(argv[:-2])
        if arg.endswith(name) and argv[i + 1] == "follow" and f"/{job_id}/" in argv[i + 2]
    ]


def _followers(job_id: str) -> list[int]:
    return [pid for pid, _ in _follows(job_id)]


def _lines_in(log: Path) -> int:
    try:
        return log.read_bytes().count(b"\n")
    except OSError:
        return 0


@contextlib.contextmanager
def _running(script: Path, *extra: str) -> Iterator[subprocess.Popen[str]]:
    """`_spawn`, and whatever the test does, the process is gone at the end."""
    proc = _spawn(script, *extra)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def _wait_running(emulator) -> None:  # noqa: ANN001
    def running() -> bool:
        objects = bucket_objects(emulator)
        return any(k.endswith("worker-0.json") and b'"RUNNING"' in v for k, v in objects.items())

    wait_for(running)


def test_ctrl_c_stops_the_job_and_deletes_the_node(emulator, project) -> None:
    # With --json the job's log goes to stderr, read here as it comes: a line of it means
    # the client watches the job. (Its agent says RUNNING before the client's start call
    # has returned; a Ctrl-C between the two is met by the client's guard instead, which
    # says so and deletes the node: not what this test is about.)
    with spawned("run", str(project / "job.py"), "--env", "NAP=60", "--json", timeout=90) as p:
        p.wait_for("worker 0 of 1 job", timeout=60)
        p.proc.send_signal(signal.SIGINT)
    assert p.proc.returncode == 130, p.err
    assert "stopped job" in p.err and "deleted its node" in p.err
    assert "Traceback" not in p.err
    assert emulator.nodes() == []


def test_sigkill_of_the_client_leaves_the_agent_to_tear_down(emulator, project) -> None:
    with _running(project / "job.py", "--env", "NAP=2") as proc:
        _wait_running(emulator)
        proc.kill()  # SIGKILL: no cleanup of any kind on this side
        proc.communicate(timeout=30)
        assert len(emulator.nodes()) == 1
        wait_for(lambda: emulator.nodes() == [], timeout=90)


def test_a_dropped_log_stream_resumes_without_loss_or_duplicates(cli, emulator, tmp_path):
    """Kill the log follower on the worker mid-job: tpuctl reconnects from its offset."""
    root = tmp_path / "count"
    root.mkdir()
    (root / "count.py").write_text(
        "import time\nfor i in range(60):\n    print('line', i, flush=True)\n    time.sleep(0.05)\n"
    )
    with _running(root / "count.py") as proc:
        _wait_running(emulator)
        (job,) = {k.split("/")[2] for k in bucket_names(emulator) if "/status/" in k}
        # mid-stream: a follower streams the log, some lines are written, most to come
        wait_for(lambda: any(_lines_in(log) >= 5 for _, log in _follows(job)), timeout=30)

        # the follower is a process on the emulated worker, like any other there
        def kill_follower() -> bool:
            pids = _followers(job)
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)  # what pkill sent
            return bool(pids)

        wait_for(kill_follower, timeout=30)  # it was there, and now it is gone
        out, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err
    lines = [ln for ln in out.splitlines() if ln.startswith("line ")]
    assert [ln.strip() for ln in lines] == [f"line {i}" for i in range(60)]
    assert emulator.nodes() == []


def test_a_failed_teardown_is_loud_and_names_the_node(cli, emulator, project) -> None:
    assert cli("create", "stuck", "-a", "v3-8").code == 0
    proc = _spawn(project / "job.py", "--node", "stuck", "--teardown", "--env", "NAP=3")
    try:
        _wait_running(emulator)
        # From now on every call about this node is refused (the agent's delete too).
        emulator.faults(rate=1.0, codes=[429], quota=True, paths="nodes/stuck")
        out, err = proc.communicate(timeout=120)
    finally:
        emulator.faults(rate=0)
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode != 0
    assert "error: teardown failed: node stuck in us-central1-a may still be billing" in err
    assert "tpuctl delete stuck --zone us-central1-a --yes" in err
    # The agent keeps retrying its own delete once the faults are gone: either way the
    # node must end up deleted.
    assert cli("delete", "stuck", "--yes", "--missing-ok").code == 0
    wait_for(lambda: emulator.nodes() == [])


def _node_name(emulator) -> str:  # noqa: ANN001
    wait_for(lambda: len(emulator.nodes()) == 1 and emulator.nodes()[0]["state"] == "READY")
    return str(emulator.nodes()[0]["name"])


def _wait_checkpoint(emulator) -> None:  # noqa: ANN001
    wait_for(lambda: any(k.endswith("checkpoint-worker0.npz") for k in bucket_names(emulator)))


def wait_in_first_log(emulator_server, text: str) -> None:  # noqa: ANN001
    """Until worker 0's log of the job's first attempt, on its VM, holds `text`."""
    root = emulator_server.backend.workers.root
    wait_for(
        lambda: any(
            text in log.read_text(errors="replace")
            for log in root.glob("*/w0/home/.tpuctl/jobs/*/attempt-1.log")
        )
    )


def test_a_preempted_spot_job_recovers_and_resumes_from_its_checkpoint(emulator) -> None:
    with _running(
        EXAMPLE,
        "--spot",
        "--restarts",
        "1",
        "--sync-every",
        "1",
        "--",
        "--steps",
        "150",
        "--sleep",
        "0.04",
    ) as proc:
        name = _node_name(emulator)
        _wait_checkpoint(emulator)
        emulator.preempt(name)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "is PREEMPTED during attempt 1; recreating it (restart 1 of 1)" in err
    assert "=== tpuctl: attempt 2 (TPUCTL_RESTART=1) ===" in out
    after = out.split("=== tpuctl: attempt 2")[1]
    resumed = int(after.split("resumed from step ")[1].split()[0])
    assert resumed >= 10  # the loss continues from the checkpoint, not from step 0
    assert "step    10 " not in after
    assert "after 1 restart(s); exit status 0" in err
    assert emulator.nodes() == []


def test_a_preemption_notice_is_passed_on_and_the_job_resumes_from_what_it_saved(
    emulator_server, emulator
) -> None:
    """With the default --sync-every (30 s) and no periodic checkpoint, the only state the
    restarted job can find is what the script saved on the notice's SIGTERM and the agent
    synced in the notice: it resumes from exactly that step."""
    with _running(
        EXAMPLE, "--spot", "--restarts", "1", "--",
        "--steps", "400", "--sleep", "0.02", "--checkpoint-every", "1000000",
    ) as proc:  # fmt: skip
        name = _node_name(emulator)
        wait_in_first_log(emulator_server, "step    20 ")
        emulator.preempt(name, notice=30)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    saved = int(out.split("SIGTERM at step ")[1].split(":")[0])
    assert saved >= 20
    assert "preemption notice" in out  # the agent says it, in the job's log
    assert "is PREEMPTED during attempt 1; recreating it (restart 1 of 1)" in err
    after = out.split("=== tpuctl: attempt 2")[1]
    assert f"resumed from step {saved} " in after
    assert "after 1 restart(s); exit status 0" in err
    assert emulator.nodes() == []


def test_preemptions_beyond_the_restarts_end_clearly(emulator) -> None:
    with _running(
        EXAMPLE,
        "--spot",
        "--restarts",
        "1",
        "--",
        "--steps",
        "100000",
        "--sleep",
        "0.05",
    ) as proc:
        first = _node_name(emulator)
        _wait_running(emulator)
        emulator.preempt(first)
        # the recreated node, once its job runs again
        wait_for(
            lambda: any(
                b'"attempt": 2' in v and b'"RUNNING"' in v
                for v in bucket_objects(emulator, lambda k: "/status/" in k).values()
            )
        )
        emulator.preempt(_node_name(emulator))
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert "was PREEMPTED during attempt 2 and the job has used its 1 restart(s)" in err
    assert emulator.nodes() == []
    # no notice (the suite's preempt_notice is 0): the agent died without a word, and the
    # client recorded its end, so the job's record does not stay RUNNING
    states = [
        json.loads(v)["state"] for k, v in bucket_objects(emulator).items() if "/status/" in k
    ]
    assert states == ["PREEMPTED"], states


def test_run_queued_provisions_through_the_queue_and_leaves_nothing(cli, emulator, project):
    r = cli("run", str(project / "job.py"), "--queued", "--spot", "--valid-until", "1h")
    assert r.code == 0, r.err
    assert "worker 0 of 1 job" in r.out
    assert emulator.nodes() == []
    assert emulator.queued() == []  # the request went with its node


def test_run_queued_bad_flags(cli, emulator, project) -> None:
    r = cli("run", str(project / "job.py"), "--valid-until", "1h")
    assert r.code == 2
    assert "--valid-until needs --queued" in one_line_error(r)


def test_a_recreated_node_is_deleted_when_the_run_stops_before_its_agents(emulator) -> None:
    """The restart path is inside the teardown guard: a node recreated after a preemption
    that has no agents yet is deleted at once when the run is stopped."""
    with _running(EXAMPLE, "--spot", "--restarts", "1", "--", "--steps", "100000") as proc:
        first = _node_name(emulator)
        _wait_running(emulator)
        emulator.durations(create=None)  # the recreated node stays CREATING
        emulator.preempt(first)
        wait_for(lambda: [n["state"] for n in emulator.nodes()] == ["CREATING"])
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=90)
    assert proc.returncode == 130, err
    assert "recreating it (restart 1 of 1)" in err
    assert "Traceback" not in err
    assert emulator.nodes() == []


def test_jobs_are_found_by_their_name_too(cli, emulator, project) -> None:
    r = cli("run", str(project / "job.py"), "--name", "nightly")
    assert r.code == 0, r.err
    logs = cli("logs", "nightly")
    assert logs.code == 0, logs.err
    assert "worker 0 of 1 job" in logs.out
    done = cli("cancel", "nightly")
    assert done.code == 0
    assert "is already SUCCEEDED: nothing to stop" in done.err
    missing = cli("cancel", "nobody-named-this")
    assert missing.code == 4
    assert "no job with the id or name 'nobody-named-this'" in one_line_error(missing)
    assert "`tpuctl jobs` lists them" in missing.err
