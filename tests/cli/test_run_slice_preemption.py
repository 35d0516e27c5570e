"""One VM of a Compute Engine slice preempted mid-job: Compute Engine gives the notice
to that VM alone, so its agent (and the client, as a backstop) passes it on to the
other workers' agents, which sync their outputs and report PREEMPTED before the slice is
deleted or made again. No worker's status stays RUNNING, no output written up to the
notice is lost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_run import _running, bucket_objects, wait_for
from tests.cli.test_run_lifecycle import _statuses

SLICE_ZONE = "us-east1-d"
SLICE = ("-a", "v6e-16", "--api", "compute", "--zone", SLICE_ZONE)

# One output file per step, named by worker (a slice's workers share the outputs), until
# SIGTERM; the outputs are synced only at the end (--sync-every 1h).
STEPS = """\
import os, signal, time
out, me = os.environ["TPUCTL_OUTPUT_DIR"], os.environ["TPUCTL_WORKER_ID"]
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
step = 0
while not stop:
    step += 1
    with open(os.path.join(out, f"w{me}-step{step:05d}.txt"), "w") as f:
        f.write(str(step))
    time.sleep(0.05)
print(f"worker {me} stopped at step {step}", flush=True)
"""


def _local_outputs(root: Path, worker: int) -> set[str]:
    """The output files worker `worker` of the slice has written so far, on its VM."""
    return {p.name for p in root.glob(f"*/w{worker}/home/.tpuctl/jobs/*/outputs/*.txt")}


@pytest.mark.long
def test_one_preempted_vm_of_a_slice_ends_every_worker_with_its_outputs_synced(
    cli, emulator_server, emulator, tmp_path
) -> None:
    (tmp_path / "steps.py").write_text(STEPS)
    root = emulator_server.backend.workers.root
    with _running(
        tmp_path / "steps.py", *SLICE, "--spot", "--restarts", "0", "--sync-every", "1h"
    ) as proc:
        wait_for(lambda: all(len(_local_outputs(root, k)) >= 5 for k in range(4)), timeout=120)
        (group,) = [
            i["name"] for i in emulator.instances() if "/instanceGroupManagers/" in i["name"]
        ]
        node = group.rsplit("/", 1)[1]
        r = cli(
            "emulator", "preempt", node, "--zone", SLICE_ZONE, "--worker", "2", "--notice", "30"
        )
        assert r.code == 0, r.err
        written = {k: _local_outputs(root, k) for k in (0, 1, 3)}  # up to the notice, at least
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert "was PREEMPTED during attempt 1" in err, err
    states = {s["worker"]: s["state"] for s in _statuses(emulator).values()}
    assert states == dict.fromkeys(range(4), "PREEMPTED"), states
    job = json.loads(cli("jobs", "--json").out)[0]["name"]
    shown = cli("jobs", job)
    assert shown.code == 0 and "RUNNING" not in shown.out, shown.out
    synced = {k.rsplit("/", 1)[1] for k in bucket_objects(emulator) if "/outputs/" in k}
    for worker, files in written.items():
        assert files and files <= synced, f"worker {worker} lost {sorted(files - synced)[:5]}"
        assert f"worker {worker} stopped at step" in out  # on the notice, not killed
    assert emulator.instances() == []
