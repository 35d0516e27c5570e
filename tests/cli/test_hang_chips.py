"""The hang check weighs the chips' own figures first (agent/hang.py): a quiet job on a
chip libtpu shows busy is no hang, whatever Cloud Monitoring says; once its chips idle
for --hang-after, it is, and the worker's status names libtpu as the evidence's source."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_run import bucket_objects, wait_for

# the chips' figures come from libtpu's gRPC service, read with grpc, which a TPU VM
# with jax[tpu] or tpu-info has: the workers' python3 is the suite's, which has it
pytestmark = pytest.mark.usefixtures("workers_have_jax")

SCRIPT = """\
import threading

print("started", flush=True)
threading.Event().wait()
"""
HANG_AFTER = 4.0


@pytest.mark.long
def test_busy_chips_hold_off_the_hang_and_idle_ones_are_named_as_its_evidence(
    cli, emulator, tmp_path: Path
) -> None:
    (tmp_path / "job").mkdir()
    script = tmp_path / "job" / "quiet.py"
    script.write_text(SCRIPT)
    flags = ["-a", "v4-8", "-z", "us-central2-b", "--detach", "--json"]
    r = cli("run", str(script), *flags, "--hang-after", f"{HANG_AFTER:g}s")
    assert r.code == 0, r.err
    job = json.loads(r.out)["job"]
    try:
        node = emulator.nodes()[0]["name"]
        emulator.set_chips(node, 0, [{"chip": 1, "duty_cycle": 90.0}])

        def row() -> dict[str, Any]:
            return json.loads(cli("jobs", job, "--json").out)

        def busy_read_at() -> float | None:
            chips = row()["chips"]
            duty = [c["dutyCycle"] for w in chips for c in w["chips"]]
            return chips[0]["at"] if 90.0 in duty else None

        wait_for(lambda: busy_read_at() is not None, timeout=120)
        first = busy_read_at()
        assert first is not None
        # a hang said before the busy reading (the chips were 0% until set) is taken back
        wait_for(lambda: row()["hungWorkers"] == [], timeout=30)

        def busy_for_long() -> bool:
            shown = row()
            assert shown["hungWorkers"] == [] and shown["state"] == "RUNNING", shown
            return (busy_read_at() or 0.0) >= first + 3 * HANG_AFTER

        wait_for(busy_for_long, timeout=60)  # quiet for 3 x --hang-after: busy, no hang

        emulator.set_chips(node, 0, [{"chip": 1, "duty_cycle": 0.0}])
        wait_for(lambda: row()["hungWorkers"] == [0], timeout=60)
        status_name = f"tpuctl/jobs/{job}/status/worker-0.json"
        [status] = bucket_objects(emulator, lambda name: name == status_name).values()
        evidence = json.loads(status)["hung_chips"]
        assert evidence.startswith("chips idle ") and evidence.endswith(
            "(duty cycle <= 1%, libtpu)"
        ), evidence
        wait_for(lambda: "chips idle" in cli("logs", job).out)  # the log, uploaded
    finally:
        assert cli("cancel", job).code == 0
        wait_for(lambda: emulator.nodes() == [], timeout=120)
