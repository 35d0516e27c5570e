"""`tpuctl run` through a host maintenance, on both APIs: the job gets the notice (the
agent passes SIGTERM on, examples/train.py saves a checkpoint), the runner waits for the
node to go down and come back (TPU API: REPAIRING then READY; Compute Engine: TERMINATED
then RUNNING), starts the next attempt there, and the job resumes from its checkpoint
and ends 0, the receipt naming one maintenance restart. The maintenance's phases are
moved on with the emulator's `advance`, each once the condition before it holds."""

from __future__ import annotations

from typing import Any

import pytest

from tests.cli.test_run import EXAMPLE, _running, bucket_objects, wait_for

TRAIN = ("--sync-every", "1", "--", "--steps", "400", "--sleep", "0.03")
ON = {
    "tpu": ("-a", "v3-8", "--zone", "us-central1-a"),
    "compute": ("-a", "tpu7x-8", "--zone", "us-central1-c"),
}


def _node(emulator: Any, api: str) -> tuple[str, Any]:
    """(the maintenance's target path, a function giving its state) once it runs."""
    if api == "tpu":
        wait_for(lambda: [n["state"] for n in emulator.nodes()] == ["READY"])
        name = str(emulator.nodes()[0]["name"])
        return name, lambda: [n["state"] for n in emulator.nodes()]
    wait_for(lambda: [i["status"] for i in emulator.instances()] == ["RUNNING"])
    path = str(emulator.instances()[0]["name"])
    return path, lambda: [i["status"] for i in emulator.instances()]


def _status_says(emulator: Any, attempt: int, *words: bytes) -> bool:
    return any(
        k.endswith("worker-0.json") and f'"attempt": {attempt}'.encode() in v
        and all(w in v for w in words)
        for k, v in bucket_objects(emulator).items()
    )  # fmt: skip


@pytest.mark.parametrize("api", ["tpu", "compute"])
def test_a_job_survives_a_host_maintenance_and_resumes_from_its_checkpoint(
    emulator, api: str
) -> None:
    with _running(EXAMPLE, *ON[api], *TRAIN) as proc:
        path, states = _node(emulator, api)
        wait_for(
            lambda: any(k.endswith("checkpoint-worker0.npz") for k in bucket_objects(emulator))
        )
        emulator.maintenance(path, notice=0, duration=3600)  # the window starts now
        # the agent ends the attempt on the notice, its outputs synced
        wait_for(lambda: _status_says(emulator, 1, b'"PREEMPTED"', b'"maintenance"'))
        emulator.advance(path)  # the guest is down: REPAIRING / TERMINATED
        wait_for(lambda: states() in (["REPAIRING"], ["TERMINATED"]))
        emulator.advance(path)  # the window is over: the node comes back
        out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    assert "is down for host maintenance" in err
    assert "waiting for it to come back, then resuming the job" in err
    assert "recreating" not in err  # the same node came back
    assert "tpuctl-agent: maintenance notice (" in out  # the agent says it, in the job's log
    assert "SIGTERM at step " in out  # the script saved its state on the notice
    after = out.split("=== tpuctl: attempt 2 (TPUCTL_RESTART=1) ===")[1]
    saved = int(out.split("SIGTERM at step ")[1].split(":")[0])
    assert f"resumed from step {saved} " in after
    assert "step     1 " not in after
    assert "after 1 restart(s); exit status 0" in err
    assert "receipt: 1 maintenance restart" in err
    assert emulator.nodes() == [] and emulator.instances() == []  # nothing left billing
