"""Per-chip telemetry, live: what the emulated chips of a running v4-32 job show in
libtpu's runtime metrics and SDK reaches `tpuctl jobs JOB` within seconds, per worker,
naming its source (agent/chips.py, services/chips.py); a worker whose image has no libtpu
SDK keeps its HBM and duty cycle, without TensorCore utilisation."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_run import wait_for

# the chips' figures come from libtpu's gRPC service, read with grpc, which a TPU VM
# with jax[tpu] or tpu-info has: the workers' python3 is the suite's, which has it
pytestmark = pytest.mark.usefixtures("workers_have_jax")

GIB = 1 << 30
SCRIPT = """\
import threading

print("started", flush=True)
threading.Event().wait()
"""
# worker -> what its chips are set to: a saturated chip, chips that hold memory and do
# nothing, a chip half busy, a worker left as it started (and without libtpu's SDK)
SET: dict[int, list[dict[str, Any]]] = {
    0: [{"chip": 0, "hbm_used": 30 * GIB, "duty_cycle": 100.0, "tensorcore_util": 87.5}],
    1: [{"chip": c, "hbm_used": 20 * GIB, "duty_cycle": 0.0} for c in range(4)],
    2: [{"chip": 3, "hbm_used": 8 * GIB, "duty_cycle": 50.0, "tensorcore_util": 12.3}],
    3: [],
}
NO_SDK = 3


def _expected(worker: int) -> list[dict[str, Any]]:
    util = None if worker == NO_SDK else 0.0
    chips = [
        {"chip": c, "hbmUsed": 0, "hbmTotal": 32 * GIB, "dutyCycle": 0.0}
        | {"tensorcoreUtilization": util}
        for c in range(4)
    ]
    for item in SET[worker]:
        chips[item["chip"]].update(hbmUsed=item["hbm_used"], dutyCycle=item["duty_cycle"])
        if "tensorcore_util" in item:
            chips[item["chip"]]["tensorcoreUtilization"] = item["tensorcore_util"]
    return chips


@pytest.mark.long
def test_jobs_shows_each_workers_chips_seconds_after_they_change(
    cli, emulator, tmp_path: Path
) -> None:
    (tmp_path / "job").mkdir()
    script = tmp_path / "job" / "wait.py"
    script.write_text(SCRIPT)
    r = cli("run", str(script), "-a", "v4-32", "-z", "us-central2-b", "--detach", "--json")
    assert r.code == 0, r.err
    job = json.loads(r.out)["job"]
    try:

        def row() -> dict[str, Any]:
            return json.loads(cli("jobs", job, "--json").out)

        # before any is set: every worker's 4 chips, nothing used, v4's 32 GiB each
        wait_for(lambda: len(row()["chips"]) == 4, timeout=120)
        node = emulator.nodes()[0]["name"]
        for worker, chips in SET.items():
            emulator.set_chips(node, worker, chips, sdk=worker != NO_SDK)
        set_at = time.monotonic()

        def shown() -> bool:
            return [(w["worker"], w["chips"]) for w in row()["chips"]] == [
                (k, _expected(k)) for k in range(4)
            ]

        wait_for(shown, timeout=30)
        assert time.monotonic() - set_at < 15  # within a few seconds (one look: 5 s)
        for w in row()["chips"]:
            assert w["source"] == "libtpu" and w["error"] is None, w
            assert w["address"].startswith("localhost:") and w["age"] < 15
        out = cli("jobs", job).out
        assert "chips, live (HBM, duty cycle and TensorCore use from libtpu" in out
        lines = [line.split()[:9] for line in out.splitlines()]
        assert ["w0", "0", "30.0", "GiB", "32.0", "GiB", "100%", "88%", "libtpu"] in lines, out
        assert ["w1", "2", "20.0", "GiB", "32.0", "GiB", "0%", "0%", "libtpu"] in lines, out
        assert ["w3", "1", "0.0", "GiB", "32.0", "GiB", "0%", "-", "libtpu"] in lines, out

        # top: the node's job's chips together (--json: per worker, as `jobs` has them)
        [shot] = json.loads(cli("top", "--json").out)
        assert [(w["worker"], w["chips"]) for w in shot["chips"]] == [
            (k, _expected(k)) for k in range(4)
        ]
        table = cli("top", "--zone", "us-central2-b").out
        # 30 + 80 + 8 GiB of 16 x 32; duty (100 + 50) / 16 chips; TensorCore utilisation
        # (87.5 + 12.3) / the 12 chips whose worker has the SDK
        header, line = table.splitlines()[:2]
        assert header.split()[-4:] == ["HBM", "DUTY", "TC", "UTIL"], table
        assert line.split()[-4:] == ["118/512", "GiB", "9%", "8%"], table
    finally:
        assert cli("cancel", job).code == 0
        wait_for(lambda: emulator.nodes() == [], timeout=120)
    ended = row()
    assert ended["state"] == "CANCELLED" and ended["chips"] == []


def test_a_worker_whose_chips_could_not_be_read_says_why_and_what_stands_in(capsys) -> None:
    from tpuctl.cli.chips_table import show_chips

    error = "no Python here has the grpc module (pip install grpcio, or tpu-info)"
    workers = [
        {
            "worker": 0,
            "source": "libtpu",
            "address": "localhost:8431",
            "age": 2.0,
            "error": None,
            "chips": [{"chip": 0, "hbmUsed": 3 * GIB, "hbmTotal": 16 * GIB, "dutyCycle": None}],
        },
        {
            "worker": 1,
            "source": "libtpu",
            "address": "localhost:8431",
            "age": 4.0,
            "error": error,
            "chips": [],
        },
    ]
    show_chips(workers, lambda w: f"w{w}")
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines()]
    assert ["w0", "0", "3.0", "GiB", "16.0", "GiB", "-", "libtpu"] in [r[:8] for r in rows], out
    assert f"libtpu localhost:8431, 4s ago: {error}" in " ".join(out.split()), out
    assert "Cloud Monitoring's figures stand in: UTIL and IDLE above" in out
