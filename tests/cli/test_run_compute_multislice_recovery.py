"""A preempted slice of a multislice job on Compute Engine: one VM of slice 1 gets the
notice, the attempt ends on every worker of every slice (each worker's outputs synced),
every slice is made again and attempt 2 runs everywhere with TPUCTL_RESTART=1; nothing
is left after."""

from __future__ import annotations

import contextlib
import json
import re
import threading
from pathlib import Path

import pytest
from google.api_core.exceptions import NotFound

from tests.cli.conftest import spawned
from tests.cli.test_run import wait_for
from tests.cli.test_run_multislice import env_of

PROJECT = "tpuctl-demo"
V6E = ("-a", "v6e-16", "--api", "compute", "--zone", "us-east1-d", "--slices", "2")
TPU7X = ("-a", "tpu7x-8", "--zone", "us-central1-c", "--slices", "2")

# Its environment printed (env_of reads it), one output file per worker and attempt, and
# on attempt 1 a wait for the notice's SIGTERM (a checkpoint written on it).
SCRIPT = """\
import os, signal, sys, time
me = "s%s/w%s" % (os.environ["TPUCTL_SLICE_ID"], os.environ["TPUCTL_WORKER_ID"])
for key in sorted(os.environ):
    if key.startswith(("MEGASCALE_", "TPUCTL_")) and key != "TPUCTL_OUTPUT_DIR":
        print("env", me, key + "=" + os.environ[key])
out, attempt = os.environ["TPUCTL_OUTPUT_DIR"], os.environ["TPUCTL_ATTEMPT"]
tag = "w%s-attempt%s" % (os.environ["TPUCTL_WORKER_ID"], attempt)
def checkpoint(*_):
    open(os.path.join(out, tag + "-checkpoint.txt"), "w").write(me)
    sys.exit(0)
signal.signal(signal.SIGTERM, checkpoint)
open(os.path.join(out, tag + ".txt"), "w").write(me)
print("ready", me, flush=True)
time.sleep(120 if attempt == "1" else float(os.environ.get("NAP", "0")))
"""


@pytest.fixture
def job(tmp_path: Path) -> Path:
    (tmp_path / "job.py").write_text(SCRIPT)
    return tmp_path / "job.py"


def slice_parts(emulator, index: int) -> list[str]:  # noqa: ANN001
    """The names of slice `index` of the job's multislice: its group, or its one VM."""
    return [
        r["name"].rsplit("/", 1)[-1]
        for r in emulator.instances()
        if r["status"] in ("INSTANCE_GROUP_MANAGER", "RUNNING")
        and re.fullmatch(rf"tpuctl-\d+-\d+-[0-9a-f]+-{index}", r["name"].rsplit("/", 1)[-1])
    ]


def objects(emulator, part: str) -> list[bytes]:  # noqa: ANN001
    """The objects of the bucket whose names hold `part` (only those read: a poll that
    reads every log and output each time loads a busy machine)."""
    try:
        client = emulator.storage_client()
    except OSError:  # the emulator slow to answer on a loaded machine: not yet
        return []
    bucket = client.bucket("tpuctl-demo-tpuctl")
    if not bucket.exists():
        return []
    found = []
    for listed in client.list_blobs(bucket):
        if part in listed.name:
            with contextlib.suppress(NotFound):  # deleted since
                found.append(bucket.blob(listed.name).download_as_bytes())
    return found


def ready_everywhere(emulator, workers: int) -> bool:  # noqa: ANN001
    """Has every worker of the job printed `ready` in attempt 1?"""
    logs = objects(emulator, "/logs/attempt-1/")
    return len([v for v in logs if b"ready s" in v]) == workers


def preempt_slice_1(emulator, zone: str, workers: int, worker: int | None) -> threading.Thread:  # noqa: ANN001
    def preempt() -> None:
        wait_for(lambda: ready_everywhere(emulator, workers), timeout=90)
        (name,) = slice_parts(emulator, 1)
        emulator.preempt_worker(PROJECT, zone, name, worker=worker, notice=5)

    helper = threading.Thread(target=preempt, daemon=True)
    helper.start()
    return helper


@pytest.mark.long
@pytest.mark.parametrize(
    ("shape", "per_slice", "worker"), [(V6E, 4, 2), (TPU7X, 1, None)], ids=["v6e-16", "tpu7x-8"]
)
def test_a_preempted_vm_of_one_slice_restarts_every_slice(
    cli, emulator, job, tmp_path, shape, per_slice, worker
) -> None:
    zone = shape[shape.index("--zone") + 1]
    helper = preempt_slice_1(emulator, zone, 2 * per_slice, worker)
    out = tmp_path / "out"
    r = cli("run", str(job), *shape, "--spot", "--restarts", "1",
            "--outputs", str(out), "--json")  # fmt: skip
    helper.join(timeout=5)
    assert r.code == 0, r.err
    made = [b["body"] for b in emulator.bodies("compute.instances.insert")] + [
        b["body"]["properties"] for b in emulator.bodies("compute.regionInstanceTemplates.insert")
    ]
    assert len(made) == 4  # two slices, made twice
    assert {m["scheduling"]["provisioningModel"] for m in made} == {"SPOT"}
    assert "a slice is PREEMPTED (slice 1) during attempt 1; recreating every slice" in r.err
    assert "=== tpuctl: attempt 2 (TPUCTL_RESTART=1) ===" in r.err
    everyone = {f"s{s}/w{k}" for s in range(2) for k in range(per_slice)}
    env = env_of(r.err)  # with --json the logs go to stderr; attempt 2's lines last
    assert {who for who, v in env.items() if v.get("TPUCTL_RESTART") == "1"} == everyone
    assert {v["TPUCTL_ATTEMPT"] for v in env.values()} == {"2"}
    result = json.loads(r.out)
    assert set(result["states"].values()) == {"SUCCEEDED"} and len(result["states"]) == len(
        everyone
    )
    # attempt 1 ended on every worker of both slices with its outputs synced: the file
    # each wrote first, and the checkpoint it wrote on the notice (passed on to it)
    for s in range(2):
        files = {p.name for p in (out / f"slice-{s}").iterdir()}
        for k in range(per_slice):
            assert {
                f"w{k}-attempt1.txt",
                f"w{k}-attempt1-checkpoint.txt",
                f"w{k}-attempt2.txt",
            } <= files, (s, k, files)
    assert emulator.instances() == []


def test_with_no_restart_left_a_preempted_slice_ends_the_job_and_every_slice_goes(
    cli, emulator, job, tmp_path
) -> None:
    helper = preempt_slice_1(emulator, "us-central1-c", 2, None)
    out = tmp_path / "out"
    r = cli("run", str(job), *TPU7X, "--spot", "--restarts", "0", "--outputs", str(out))
    helper.join(timeout=5)
    assert r.code == 1, r.err
    assert "(2 slices) was PREEMPTED (slice 1) during attempt 1" in r.err
    assert "used its 0 restart(s)" in r.err
    assert "attempt 2" not in r.out
    for s in range(2):  # each slice's worker synced what it had, the checkpoint too
        files = {p.name for p in (out / f"slice-{s}").iterdir()}
        assert {"w0-attempt1.txt", "w0-attempt1-checkpoint.txt"} <= files, (s, files)
    assert emulator.instances() == []


def running(emulator, attempt: int) -> int:  # noqa: ANN001
    """How many workers' agents say RUNNING in `attempt`."""
    statuses = [json.loads(v) for v in objects(emulator, "/status/worker-")]
    return len([s for s in statuses if s.get("attempt") == attempt and s["state"] == "RUNNING"])


def billing(emulator) -> list[str]:  # noqa: ANN001
    """What bills of the job's slices: VMs and groups (their templates and policies do not)."""
    free = ("INSTANCE_TEMPLATE", "WORKLOAD_POLICY")
    return [r["name"] for r in emulator.instances() if r["status"] not in free]


@pytest.mark.long
@pytest.mark.parametrize(
    ("killed", "preempted"),
    [
        ("after the restart", (1, 2)),
        ("on the preemption", (1, 2)),
        ("on the preemption", (0, 0)),  # the VM of the agent that tears down
    ],
    ids=["after-the-restart", "on-the-preemption", "on-slice-0-worker-0-s-preemption"],
)
def test_with_the_client_killed_no_vm_of_a_preempted_multislice_bills(
    cli, emulator, job, killed, preempted
) -> None:
    """SIGKILL of the client once a VM of a slice is preempted (the agent of slice 0's
    worker 0 ends the attempt and deletes every slice, also when its own VM is the one
    preempted: within the notice), or once attempt 2 runs on the slices made again
    (their agents delete them when it ends): no VM is left billing either way."""
    index, worker = preempted
    with spawned("run", str(job), *V6E, "--spot", "--restarts", "1", "--env", "NAP=5",
                 "--no-outputs", timeout=60) as p:  # fmt: skip
        wait_for(lambda: ready_everywhere(emulator, 8), timeout=90)
        (name,) = slice_parts(emulator, index)
        emulator.preempt_worker(PROJECT, "us-east1-d", name, worker=worker, notice=15)
        if killed == "after the restart":
            wait_for(lambda: running(emulator, 2) == 8, timeout=120)
        p.proc.kill()  # no cleanup of any kind on this side
    wait_for(lambda: billing(emulator) == [], timeout=90)
    attempt = 2 if killed == "after the restart" else 1
    logs = b"".join(objects(emulator, f"/logs/attempt-{attempt}/worker-0.log"))
    assert b"teardown: deleting multislice tpuctl-" in logs and b"(every slice)" in logs
    assert b"teardown failed" not in logs
    left = sorted({r["name"].rsplit("/", 1)[-1][: -len("-d-it")] for r in emulator.instances()})
    assert [n[-2:] for n in left] == ["-0", "-1"]  # each slice's template and policy
    r = cli("delete", *left, "--zone", "us-east1-d", "--yes")
    assert r.code == 0, r.err
    assert emulator.instances() == []
