"""tpuctl run --slices N against the emulator: the MEGASCALE environment on every worker
of every slice, logs and outputs per slice, teardown of every slice on every path, and
a preempted slice restarting the whole job."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests.cli.conftest import one_line_error, spawned
from tests.cli.test_run import bucket_names, bucket_objects, wait_for

ZONE = "us-central1-a"
PARENT = f"projects/tpuctl-demo/locations/{ZONE}"

SCRIPT = """\
import os, sys, time
me = "s%s/w%s" % (os.environ["TPUCTL_SLICE_ID"], os.environ["TPUCTL_WORKER_ID"])
for key in sorted(os.environ):
    if key.startswith(("MEGASCALE_", "TPUCTL_")) and key != "TPUCTL_OUTPUT_DIR":
        print("env", me, key + "=" + os.environ[key])
out = os.environ["TPUCTL_OUTPUT_DIR"]
with open(os.path.join(out, "who.txt"), "w") as f:  # the same name on every slice
    f.write(me + " attempt " + os.environ["TPUCTL_ATTEMPT"])
print("ready", me, flush=True)
if os.environ["TPUCTL_ATTEMPT"] == "1":
    time.sleep(float(os.environ.get("NAP", "0")))
sys.exit(int(os.environ.get("FAIL_ON_" + me.replace("/", "_"), "0")))
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "job.py").write_text(SCRIPT)
    return root


def env_of(out: str) -> dict[str, dict[str, str]]:
    """`env sS/wK KEY=VALUE` lines (prefixed by the runner) -> {sS/wK: {KEY: VALUE}}."""
    found: dict[str, dict[str, str]] = {}
    for line in out.splitlines():
        if "] env " not in line:
            continue
        prefix, _, rest = line.partition("] env ")
        who, _, pair = rest.partition(" ")
        key, _, value = pair.partition("=")
        assert prefix == f"[{who}", line  # the log prefix names the slice and worker
        found.setdefault(who, {})[key] = value
    return found


def test_two_slices_run_with_the_megascale_environment_and_leave_nothing(
    cli, emulator, project, tmp_path
) -> None:
    out = tmp_path / "out"
    r = cli("run", str(project / "job.py"), "-a", "v5litepod-16", "--zone", ZONE,
            "--slices", "2", "--outputs", str(out), "--json")  # fmt: skip
    assert r.code == 0, r.err
    assert "2 x v5litepod-16 on-demand in " in r.err
    result = json.loads(r.out)
    job, name = result["job"], result["node"]
    assert result["slices"] == [f"{name}-0", f"{name}-1"]
    assert set(result["states"].values()) == {"SUCCEEDED"} and len(result["states"]) == 8
    env = env_of(r.err)  # with --json the logs go to stderr
    assert sorted(env) == [f"s{s}/w{k}" for s in range(2) for k in range(4)]
    coordinator = env["s0/w0"]["MEGASCALE_COORDINATOR_ADDRESS"]
    host, _, port = coordinator.rpartition(":")
    assert port == "8080" and host.startswith("127.")
    for who, values in env.items():
        s, k = who[1], who[4]
        assert values["MEGASCALE_COORDINATOR_ADDRESS"] == coordinator, who
        assert values["MEGASCALE_PORT"] == "8080"
        assert values["MEGASCALE_NUM_SLICES"] == "2"
        assert values["MEGASCALE_SLICE_ID"] == s
        assert values["TPUCTL_SLICE_ID"] == s and values["TPUCTL_NUM_SLICES"] == "2"
        assert values["TPUCTL_WORKER_ID"] == k and values["TPUCTL_NUM_WORKERS"] == "4"
        assert values["TPUCTL_JOB_ID"] == job
    assert "s0/w0-w3 SUCCEEDED, s1/w0-w3 SUCCEEDED" in r.err
    assert f"deleted queued resource {name} (2 slices)" in r.err
    # outputs per slice: the two slices' files of one name do not overwrite each other
    whos = {(out / f"slice-{s}" / "who.txt").read_text() for s in range(2)}
    assert {w.split()[0][:2] for w in whos} == {"s0", "s1"}
    logs = [k for k in bucket_objects(emulator) if "/logs/attempt-1/" in k]
    assert len(logs) == 8
    later = cli("logs", job)  # from the bucket, named as the run named them
    assert later.code == 0, later.err
    assert "[s1/w3] ready s1/w3" in later.out and "[s0/w0] ready s0/w0" in later.out
    assert emulator.nodes() == [] and emulator.queued() == []


def test_one_slice_keeps_the_single_node_layout(cli, emulator, project) -> None:
    r = cli("run", str(project / "job.py"), "-a", "v5litepod-8", "--zone", ZONE)
    assert r.code == 0, r.err
    assert "env s0/w0 TPUCTL_NUM_SLICES=1" in r.out
    assert "MEGASCALE_" not in r.out
    outputs = [k for k in bucket_objects(emulator) if "/outputs/" in k]
    assert [k.split("/outputs/")[1] for k in outputs] == ["who.txt"]
    assert emulator.nodes() == [] and emulator.queued() == []


def test_a_failed_slice_fails_the_job_and_every_slice_goes(cli, emulator, project) -> None:
    r = cli("run", str(project / "job.py"), "-a", "v5litepod-8", "--zone", ZONE,
            "--slices", "2", "--env", "FAIL_ON_s1_w0=3")  # fmt: skip
    assert r.code == 3, r.err
    assert "s1/w0 FAILED" in r.err and "s0/w0 SUCCEEDED" in r.err
    assert emulator.nodes() == [] and emulator.queued() == []


def test_a_preempted_slice_restarts_every_slice(cli, emulator, project) -> None:
    """Slice 1 is preempted while the job runs: the whole request is made again and
    attempt 2 runs on both slices."""
    import threading

    def preempt_slice_1() -> None:
        wait_for(lambda: len([n for n in emulator.nodes() if n["state"] == "READY"]) == 2)
        (node,) = [n for n in emulator.nodes() if n["name"].endswith("-1")]
        wait_for(lambda: any(b"ready s1/w0" in v for v in bucket_objects(
            emulator, lambda k: "attempt-1" in k).values()))  # fmt: skip
        emulator.preempt(node["name"])

    helper = threading.Thread(target=preempt_slice_1, daemon=True)
    helper.start()
    r = cli("run", str(project / "job.py"), "-a", "v5litepod-8", "--zone", ZONE, "--spot",
            "--slices", "2", "--restarts", "1", "--env", "NAP=30")  # fmt: skip
    helper.join()
    assert r.code == 0, r.err
    assert "a slice is PREEMPTED (slice 1) during attempt 1; recreating every slice" in r.err
    assert "=== tpuctl: attempt 2 (TPUCTL_RESTART=1) ===" in r.out
    env = env_of(r.out)
    assert env["s0/w0"]["TPUCTL_ATTEMPT"] == "2" and env["s1/w0"]["TPUCTL_ATTEMPT"] == "2"
    assert "after 1 restart(s)" in r.err
    assert emulator.nodes() == [] and emulator.queued() == []


def running_everywhere(emulator, workers: int) -> bool:  # noqa: ANN001
    """Has every worker's agent of the job said RUNNING?"""
    statuses = bucket_objects(emulator, lambda k: "/status/worker-" in k).values()
    return len([v for v in statuses if b'"RUNNING"' in v]) == workers


def test_ctrl_c_stops_every_slice_and_deletes_them_all(emulator, project) -> None:
    with spawned("run", str(project / "job.py"), "-a", "v5litepod-8", "--zone", ZONE,
                 "--slices", "2", "--env", "NAP=60", timeout=90) as p:  # fmt: skip
        wait_for(lambda: running_everywhere(emulator, 2))
        assert len(emulator.nodes()) == 2
        p.proc.send_signal(signal.SIGINT)
    assert p.proc.returncode == 130, p.err
    # The agents say RUNNING before the client's SSH starts have all returned: a Ctrl-C
    # between the two is met before the client owns the job, and its guard deletes the
    # slices (said so) instead of the agents being stopped first.
    stopped = "stopped job" in p.err and "deleted every slice" in p.err
    guarded = "interrupted before job" in p.err and "was deleted" in p.err
    assert stopped or guarded, p.err
    assert "Traceback" not in p.err
    assert emulator.nodes() == [] and emulator.queued() == []


def test_the_agent_of_slice_0_deletes_every_slice_when_the_client_is_gone(
    emulator, project
) -> None:
    with spawned("run", str(project / "job.py"), "-a", "v5litepod-8", "--zone", ZONE,
                 "--slices", "2", "--env", "NAP=5", timeout=30) as p:  # fmt: skip
        wait_for(lambda: running_everywhere(emulator, 2))
        p.proc.kill()  # SIGKILL: no cleanup of any kind on this side
    assert len(emulator.nodes()) == 2
    wait_for(lambda: emulator.nodes() == [] and emulator.queued() == [], timeout=90)
    logs = b"".join(v for k, v in bucket_objects(emulator).items() if k.endswith("worker-0.log"))
    assert b"teardown: deleting queued resource" in logs and b"(every slice)" in logs


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--slices", "0"], "--slices must be 1 or more, not 0"),
        (
            ["--slices", "2", "--node", "x"],
            "--slices asks for new slices: it does not go with --node",
        ),
    ],
)
def test_run_slices_bad_input(cli, emulator, project, args, needle) -> None:
    r = cli("run", str(project / "job.py"), "-a", "v5litepod-8", "--zone", ZONE, *args)
    assert r.code == 2, r.err
    assert needle in one_line_error(r)
    assert emulator.nodes() == [] and emulator.queued() == []


def test_a_job_file_asks_for_slices(cli, emulator, project) -> None:
    (project / "job.toml").write_text(
        'script = "job.py"\naccelerator = "v5litepod-8"\nslices = 0\n'
    )
    r = cli("run", "-f", str(project / "job.toml"), "--zone", ZONE)
    assert r.code == 2, r.err
    assert "job.toml:3: slices: --slices must be 1 or more, not 0" in one_line_error(r)
    r = cli("run", "-f", str(project / "job.toml"), "--slices", "3", "--print-spec")
    assert r.code == 0, r.err
    assert "slices = 3" in r.out
    assert emulator.nodes() == [] and emulator.queued() == []


@pytest.mark.long
def test_slices_granted_after_the_client_died_delete_their_queued_resource(
    emulator, project
) -> None:
    """SIGKILL while the request waits for capacity: granted later, with no client, the
    slices' boot guards find their own nodes (each VM knows its slice, not the request
    the client named) and delete the queued resource, every slice with it."""
    emulator.capacity({ZONE: {"v5e": 0}})
    with spawned("run", str(project / "job.py"), "-a", "v5litepod-8", "--zone", ZONE,
                 "--slices", "2", "--start-lease", "2s", timeout=30) as p:  # fmt: skip
        wait_for(lambda: any(k.endswith("/lease.json") for k in bucket_names(emulator)))
        wait_for(lambda: "WAITING_FOR_RESOURCES" in str(emulator.queued()))
        p.proc.kill()  # SIGKILL: no cleanup of any kind on this side
    assert emulator.nodes() == [] and len(emulator.queued()) == 1
    emulator.capacity({ZONE: {"v5e": None}})
    wait_for(lambda: len(emulator.nodes()) == 2)  # granted, with nobody watching
    wait_for(lambda: emulator.nodes() == [] and emulator.queued() == [], timeout=90)
