"""A TPU that breaks mid-run, after the job saved checkpoints, on both APIs: worker 0's
TPU runtime stops (the emulator's `tpu-init-fails`, planted once the job's first
checkpoint is in the bucket), the script ends with the runtime's error, the agent reads
that failure as the TPU's (agent/tpu_health.py: the TPU's checks run again and the
log's last lines), the runner replaces the node (TPU API: delete and create; Compute
Engine: the VM recreated) and the second attempt resumes from the checkpoint: exit 0,
the receipt naming one repair, nothing left billing.

And a node whose `health` turns UNHEALTHY_* mid-run (TPU API): the script's failure is
then the TPU's, with the node's health and symptoms as the evidence, which the agent
reads itself with the VM's service account (agent/tpu_api.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_run import _running, bucket_objects, wait_for
from tests.cli.test_run_repair import _job as repair_job
from tests.cli.test_tpu_preflight import _status

# examples/train.py with the TPU runtime behind it: the runtime is started at the
# program's first TPU use and checked by each step (here: a fresh start every second,
# which fails once the runtime is broken), and the program ends with its error.
WRAPPER = """\
import os, runpy, subprocess, sys, threading, time
import libtpu  # the TPU runtime starts here, as at a JAX program's first TPU use


def runtime():
    while True:
        time.sleep(1)
        probe = subprocess.run([sys.executable, "-c", "import libtpu"], capture_output=True)
        if probe.returncode:
            sys.stderr.write(probe.stderr.decode())
            sys.stderr.flush()
            os._exit(1)


threading.Thread(target=runtime, daemon=True).start()
sys.argv[0] = "train.py"
runpy.run_path("train.py", run_name="__main__")
"""
TRAIN = ("--sync-every", "1", "--", "--steps", "300", "--sleep", "0.05")
ON = {
    "tpu": ("-a", "v3-8", "--zone", "us-central1-a"),
    "compute": ("-a", "tpu7x-8", "--zone", "us-central1-c"),
}
SAID = "TPU initialization failed"


def _job(tmp_path: Path) -> Path:
    """test_run_repair's job folder, its wrapper this module's."""
    script = repair_job(tmp_path)
    script.write_text(WRAPPER)
    return script


def _target(emulator: Any, api: str) -> str:
    """The full name of the job's node (TPU API) or VM (Compute Engine) once it runs."""
    if api == "tpu":
        wait_for(lambda: [n["state"] for n in emulator.nodes()] == ["READY"], timeout=120)
        return str(emulator.nodes()[0]["name"])
    wait_for(lambda: [i["status"] for i in emulator.instances()] == ["RUNNING"], timeout=120)
    return str(emulator.instances()[0]["name"])


def _checkpointed(emulator: Any) -> bool:
    return any(k.endswith("checkpoint-worker0.npz") for k in bucket_objects(emulator))


@pytest.mark.parametrize("api", ["tpu", "compute"])
def test_a_tpu_that_breaks_mid_run_is_replaced_and_the_job_resumes_from_its_checkpoint(
    emulator, tmp_path: Path, api: str
) -> None:
    with _running(_job(tmp_path), *ON[api], *TRAIN) as proc:
        target = _target(emulator, api)
        wait_for(lambda: _checkpointed(emulator), timeout=120)
        emulator.worker_fault(target, "tpu-init-fails", worker=0)
        out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    before, after = out.split("=== tpuctl: attempt 2 (TPUCTL_RESTART=1) ===")
    assert "step    10 " in before  # it had checkpointed before its TPU broke
    assert "the script failed on its TPU: RuntimeError: Unable to initialize backend" in before
    assert "worker 0's TPU did not come up (RuntimeError:" in err and SAID in err
    assert "(repair 1 of 1)" in err
    assert "resumed from step " in after and "step     1 " not in after
    assert "step   300 " in after and "done: loss" in after
    assert "receipt: 1 repair" in err and "after 1 restart(s); exit status 0" in err
    assert emulator.nodes() == [] and emulator.instances() == []  # nothing left billing


FAILS_ON_GO = """\
import os, time
print("running", flush=True)
while not os.path.exists(os.path.expanduser("~/go")):
    time.sleep(0.1)
raise RuntimeError("a step failed")
"""


def test_a_node_that_turns_unhealthy_mid_run_is_the_tpus_failure_with_its_health(
    cli: Any, emulator: Any, emulator_server: Any, tmp_path: Path
) -> None:
    zone = "us-central1-a"
    full = f"projects/tpuctl-demo/locations/{zone}/nodes/sick"
    assert cli("create", "sick", "-a", "v3-8", "-z", zone).code == 0
    (tmp_path / "job.py").write_text(FAILS_ON_GO)
    home = Path(emulator_server.backend.worker_env(full, 0)["HOME"])
    try:
        flags = ["--node", "sick", "-z", zone, "--json", "--detach"]
        r = cli("run", str(tmp_path / "job.py"), *flags)
        assert r.code == 0, r.err
        job = json.loads(r.out)["job"]
        wait_for(lambda: _status(emulator, job).get("state") == "RUNNING")
        emulator.worker_fault(full, "unhealthy", worker=0)
        (home / "go").write_text("")
        wait_for(lambda: _status(emulator, job).get("state") == "FAILED")
        status = _status(emulator, job)
        assert status["reason"] == "tpu_unhealthy" and status["exit_status"] == 1
        assert status["evidence"] == (
            "the node's health is UNHEALTHY_TENSORFLOW, its symptoms on worker 0: "
            "MESH_BUILD_FAIL: the TPU mesh could not be built on worker 0"
        )
        row = json.loads(cli("jobs", job, "--json").out)
        assert row["tpuUnhealthy"] == {"worker": 0, "evidence": status["evidence"]}
    finally:
        assert cli("delete", "sick", "-z", zone, "--yes").code == 0
