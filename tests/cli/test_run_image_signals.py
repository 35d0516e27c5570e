"""A container job stopped as a script is: a Ctrl-C reaches the container's process
(Docker's sig-proxy passes on the agent's SIGTERM), its outputs come home and the node
goes, exit 130; a preemption notice is SIGTERM to the container, which saves its
checkpoint in TPUCTL_OUTPUT_DIR, and the recreated node's container resumes from it."""

from __future__ import annotations

import signal

from tests.cli.conftest import spawned
from tests.cli.test_run import _node_name, wait_in_first_log
from tests.cli.test_run_image import IMAGE, images
from tests.emulator import registry_helpers as reg

__all__ = ["images"]  # the fixture, shared
pytestmark = reg.CONFINED
LOOP = ("--", "sh", "/app/loop.sh")  # the image's /app/loop.sh (test_run_image.LOOP)


def test_ctrl_c_reaches_the_container_brings_its_outputs_home_and_deletes_the_node(
    emulator, images, tmp_path
) -> None:
    images("v1", "hello")
    out = tmp_path / "out"
    # with --json the job's log goes to stderr: the container's own line means it runs
    args = ("run", "--image", f"{IMAGE}:v1", "--outputs", str(out), "--json", *LOOP)
    with spawned(*args, timeout=90) as p:
        p.wait_for("worker 0 looping from step 0", timeout=60)
        p.proc.send_signal(signal.SIGINT)
    assert p.proc.returncode == 130, p.err
    assert "stopped job" in p.err and "deleted its node" in p.err
    assert "Traceback" not in p.err
    # the container's trap saved the step it had reached: the signal reached it
    assert int((out / "step-0").read_text()) >= 1
    assert emulator.nodes() == []


def test_a_preempted_container_job_resumes_from_its_checkpoint_on_the_new_node(
    cli, emulator_server, emulator, images
) -> None:
    images("v1", "hello")
    args = ("run", "--image", f"{IMAGE}:v1", "--spot", "--restarts", "1", *LOOP)
    with spawned(*args, timeout=150) as p:
        name = _node_name(emulator)
        wait_in_first_log(emulator_server, "worker 0 looping from step 0")
        emulator.preempt(name, notice=30)
    out, err = p.out, p.err
    assert p.proc.returncode == 0, err
    saved = int(out.split("SIGTERM at step ")[1].split(":")[0])
    assert saved >= 1
    assert "is PREEMPTED during attempt 1; recreating it (restart 1 of 1)" in err
    after = out.split("=== tpuctl: attempt 2")[1]
    assert f"resumed from step {saved}\n" in after
    assert f"finished at step {saved + 5}\n" in after
    assert "after 1 restart(s); exit status 0" in err
    assert "receipt: 1 preemption restart\n" in err, err
    assert emulator.nodes() == []
