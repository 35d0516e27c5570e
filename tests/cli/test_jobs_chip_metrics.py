"""Per-chip figures from Cloud Monitoring where libtpu could not be read: `tpuctl jobs JOB`
shows a running worker's chips as Monitoring last sampled them (duty cycle, TensorCore
utilisation, HBM used and held) when its agent read none from libtpu, naming the source;
a worker whose agent did read libtpu keeps its libtpu row alone; a Monitoring failure
leaves `jobs JOB` working with one line of why (services/chip_metrics.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_top_compute import _devices, _step
from tests.emulator.ssh_helpers import wait_until
from tpuctl.agent import protocol
from tpuctl.cloud.clients import ClientFactory
from tpuctl.cloud.storage import Bucket
from tpuctl.services import staging

GIB = 1 << 30
PROJECT = "tpuctl-demo"
NO_GRPC = "no Python here has the grpc module (pip install grpcio, or tpu-info)"


@pytest.fixture
def bucket(emulator: Any) -> Bucket:
    b = ClientFactory().bucket(staging.default_bucket_name(PROJECT), PROJECT)
    b.ensure("us-central1")
    return b


def running_job(bucket: Bucket, node: str, zone: str, chips: dict[int, dict[str, Any]]) -> str:
    """A job running on `node`, its worker k's agent having reported `chips[k]` (the
    `chips` of its status: libtpu's chips, or why it read none)."""
    job = staging.new_job_id()
    record = {
        "id": job,
        "project": PROJECT,
        "zone": zone,
        "node": node,
        "workers": len(chips),
        "created_unix": time.time() - 60,
    }
    bucket.write_json(protocol.job_record_path(job), record)
    for w, seen in chips.items():
        status = {"worker": w, "state": protocol.RUNNING, "started": time.time() - 30}
        address = "localhost:8431"
        status["chips"] = {"source": "libtpu", "address": address, "at": time.time(), **seen}
        bucket.write_json(protocol.status_path(job, w), status)
    return job


# what a worker's agent reported of its chips: libtpu's four; none, and why; none listed
LIBTPU = {
    "chips": [
        {"chip": c, "hbm_used": 5 * GIB, "hbm_total": 32 * GIB, "duty_cycle": 80.0}
        for c in range(4)
    ]
}
UNREAD = {"chips": [], "error": NO_GRPC}
NONE_LISTED: dict[str, Any] = {"chips": []}


def sampled(
    emulator: Any, node: str, devices: list[list[Path]], work: dict[tuple[int, int], Any]
) -> None:
    """Monitoring's points of every chip idle, then with each (worker, chip) of `work`
    at its (percent busy or None, HBM used)."""
    emulator.monitoring(sample_period=None, ingestion_delay=0)
    emulator.sample()
    for (w, c), (percent, hbm) in work.items():
        if percent is not None:
            _step(devices[w][c : c + 1], percent)
        emulator.set_chips(node, w, [{"chip": c, "hbm_used": hbm}])
    emulator.sample()


def tpu_devices(emulator_server: Any, node: str, workers: int) -> list[list[Path]]:
    """Each worker's device files of a Cloud TPU API node, once its boot made them."""
    envs = [emulator_server.backend.worker_env(node, k) for k in range(workers)]
    found = [[Path(p) for p in env["TPUCTL_TPU_DEVICES"].split(",")] for env in envs]
    wait_until(lambda: all(p.exists() for d in found for p in d), f"{node} booted", 30)
    return found


def shown(cli: Any, job: str) -> dict[str, Any]:
    r = cli("jobs", job, "--json")
    assert r.code == 0, r.err
    return dict(json.loads(r.out))


def rows_of(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines()]


def test_workers_without_libtpu_show_their_chips_from_monitoring_on_the_tpu_api(
    cli: Any, emulator: Any, emulator_server: Any, bucket: Bucket
) -> None:
    zone = "us-central2-b"
    assert cli("create", "mon", "-a", "v4-32", "--zone", zone).code == 0
    node = f"projects/{PROJECT}/locations/{zone}/nodes/mon"
    try:
        devices = tpu_devices(emulator_server, node, 4)
        # worker 1's chip 2 works, 60% busy; worker 3's chip 0 holds memory, idle
        sampled(emulator, node, devices, {(1, 2): ("60", 12 * GIB), (3, 0): (None, 3 * GIB)})
        # worker 0 reads libtpu; 1 and 2 have no grpc; 3's libtpu listed no chip
        job = running_job(bucket, "mon", zone, {0: LIBTPU, 1: UNREAD, 2: UNREAD, 3: NONE_LISTED})
        before = emulator.requests()
        row = shown(cli, job)
        after = emulator.requests()
        lists = sum(after[k] - before.get(k, 0) for k in after if "timeSeries.list" in k)
        assert lists == 1 + 4  # the job's TensorCore use; each per-chip metric once

        entries = [(w["worker"], w["source"]) for w in row["chips"]]
        assert entries == [
            (0, "libtpu"),
            (1, "libtpu"),
            (1, "monitoring"),
            (2, "libtpu"),
            (2, "monitoring"),
            (3, "libtpu"),
            (3, "monitoring"),
        ]
        by = {(w["worker"], w["source"]): w for w in row["chips"]}
        assert by[(1, "libtpu")]["error"] == NO_GRPC
        one = by[(1, "monitoring")]
        assert one["age"] is not None and 0 <= one["age"] < 30 and one["error"] is None
        assert [c["chip"] for c in one["chips"]] == [0, 1, 2, 3]
        assert one["chips"][2] == {
            "chip": 2,
            "hbmUsed": 12 * GIB,
            "hbmTotal": 32 * GIB,
            "dutyCycle": 60.0,
            "tensorcoreUtilization": 60.0,
        }
        assert one["chips"][0]["dutyCycle"] == 0.0 and one["chips"][0]["hbmUsed"] == 0
        assert by[(3, "monitoring")]["chips"][0]["hbmUsed"] == 3 * GIB
        assert row["chipsNote"] is None

        out = cli("jobs", job).out
        lines = rows_of(out)
        mine = ["w1", "2", "12.0", "GiB", "32.0", "GiB", "60%", "60%", "Cloud", "Monitoring,"]
        assert mine in [line[:10] for line in lines], out
        libtpu = ["w0", "0", "5.0", "GiB", "32.0", "GiB", "80%", "-", "libtpu"]
        assert libtpu in [line[:9] for line in lines], out
        assert not any(x[:1] == ["w0"] and "Cloud" in x for x in lines), out
        assert out.count("Cloud Monitoring's figures are minutes behind") == 1
        assert "figures stand in: UTIL and IDLE" not in out

        emulator.monitoring(ingestion_delay=3600)  # no point visible yet
        late = cli("jobs", job).out
        assert "Cloud Monitoring," not in late
        assert "no per-chip figures from Cloud Monitoring: none yet for w1, w2, w3 " in late
    finally:
        emulator.faults(rate=0)
        assert cli("delete", "mon", "--zone", zone, "--yes").code == 0


def test_compute_engine_workers_show_monitorings_chips_and_a_failure_is_one_line(
    cli: Any, emulator: Any, emulator_server: Any, bucket: Bucket
) -> None:
    zone = "us-east1-d"
    assert cli("create", "cmon", "-a", "v6e-16", "--api", "compute", "--zone", zone).code == 0
    try:
        node = f"projects/{PROJECT}/zones/{zone}/instances/cmon"
        sampled(emulator, node, _devices(emulator_server, "cmon"), {(2, 1): ("40", 7 * GIB)})
        job = running_job(bucket, "cmon", zone, {0: LIBTPU, 1: LIBTPU, 2: UNREAD, 3: LIBTPU})
        row = shown(cli, job)
        monitored = [w for w in row["chips"] if w["source"] == "monitoring"]
        assert [w["worker"] for w in monitored] == [2]
        chip = monitored[0]["chips"][1]
        assert (chip["dutyCycle"], chip["tensorcoreUtilization"]) == (40.0, 40.0)
        assert (chip["hbmUsed"], chip["hbmTotal"]) == (7 * GIB, 32 * GIB)
        out = cli("jobs", job).out
        assert ["w2", "1", "7.0", "GiB", "32.0", "GiB", "40%", "40%", "Cloud"] in [
            line[:9] for line in rows_of(out)
        ], out

        # Monitoring refuses: the job is still shown, libtpu's rows too, and one line says why
        emulator.faults(rate=1.0, codes=[429], quota=True, paths="timeSeries")
        r = cli("jobs", job)
        assert r.code == 0, r.err
        assert "Cloud Monitoring," not in r.out and "libtpu localhost:8431" in r.out
        why = [x for x in r.out.splitlines() if x.startswith("no per-chip figures from")]
        assert len(why) == 1 and "quota" in why[0].lower(), r.out
        assert "Cloud Monitoring's figures stand in: UTIL and IDLE above" in r.out
        assert "Traceback" not in r.err
        failed = shown(cli, job)
        assert [w["source"] for w in failed["chips"]] == ["libtpu"] * 4
        assert "quota" in failed["chipsNote"].lower()
    finally:
        emulator.faults(rate=0)
        assert cli("delete", "cmon", "--zone", zone, "--yes").code == 0
