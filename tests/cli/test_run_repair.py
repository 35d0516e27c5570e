"""`tpuctl run` on a node whose TPU does not come up: worker 0's TPU runtime fails to
start (the emulator's `tpu-init-fails`, planted on the node the job made), the script
ends before its first step with JAX's "TPU initialization failed" error, the agent reports
the TPU's failure with that line as evidence and leaves the node, and the runner
replaces the node and runs the job again there (a repair, --repairs 1 by default): exit
0, the receipt naming one repair. With --repairs 0 the job ends with one line naming the
worker and the evidence, and the node is deleted.

The job's script is examples/train.py behind a wrapper that starts the TPU runtime first
(imports libtpu, as a JAX program's first TPU use does); the job's first setup waits
until the fault is planted, so the script meets it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from tests.cli.test_run import EXAMPLE, _running, wait_for

WRAPPER = """\
import runpy, sys
import libtpu  # the TPU runtime starts here, as at a JAX program's first TPU use
sys.argv[0] = "train.py"
runpy.run_path("train.py", run_name="__main__")
"""
# the first attempt's setup holds the script until the worker's TPU is broken
SETUP = (
    '[ "$TPUCTL_RESTART" != 0 ] || '
    "until ! python3 -c 'import libtpu' 2>/dev/null; do sleep 0.1; done"
)
V3 = ("-a", "v3-8", "--zone", "us-central1-a", "--setup", SETUP)
TRAIN = ("--sync-every", "1", "--", "--steps", "60", "--checkpoint-every", "10")
SAID = "TPU initialization failed"


def _job(tmp_path: Path) -> Path:
    folder = tmp_path / "job"
    folder.mkdir()
    shutil.copy(EXAMPLE, folder / "train.py")
    (folder / "tpu_train.py").write_text(WRAPPER)
    return folder / "tpu_train.py"


def _break_tpu(emulator: Any) -> dict[str, Any]:
    """Plant `tpu-init-fails` on worker 0 of the job's node once it is READY: the node."""
    wait_for(lambda: [n["state"] for n in emulator.nodes()] == ["READY"], timeout=120)
    node = emulator.nodes()[0]
    planted = emulator.worker_fault(str(node["name"]), "tpu-init-fails", worker=0)
    assert SAID in planted["error"]
    return dict(node)


def test_a_node_whose_tpu_does_not_come_up_is_replaced_and_the_job_finishes(
    emulator, tmp_path: Path
) -> None:
    with _running(_job(tmp_path), *V3, *TRAIN) as proc:
        broken = _break_tpu(emulator)
        out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err
    assert "worker 0's TPU did not come up (RuntimeError: Unable to initialize backend" in err
    assert "replacing node" in err and "(repair 1 of 1)" in err
    assert "the script failed on its TPU: RuntimeError:" in out  # the agent's line
    after = out.split("=== tpuctl: attempt 2 (TPUCTL_RESTART=1) ===")[1]
    assert "step    60 " in after and "done: loss" in after
    assert "receipt: 1 repair" in err and "restart" not in err.split("receipt: 1 repair")[1]
    assert "after 1 restart(s); exit status 0" in err
    # a new node was made in its place, and nothing is left billing
    parent = "/v2/" + str(broken["name"]).rsplit("/", 1)[0]
    assert [b["path"] for b in emulator.bodies("create")] == [parent, parent]
    assert emulator.nodes() == []


def test_with_no_repairs_the_job_ends_naming_the_worker_and_the_evidence(
    emulator, tmp_path: Path
) -> None:
    with _running(_job(tmp_path), *V3, "--repairs", "0", *TRAIN) as proc:
        _break_tpu(emulator)
        out, err = proc.communicate(timeout=240)
    assert proc.returncode == 1, err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, err
    assert errors[0].startswith("error: worker 0's TPU did not come up: RuntimeError: ")
    assert SAID in errors[0] and "the node was deleted" in errors[0]
    assert "attempt 2" not in out  # not run again
    assert emulator.nodes() == []  # nothing left billing
