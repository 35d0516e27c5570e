"""The receipt at the end of `run`: its parts add up to the node's life as the run saw it,
and `tpuctl jobs JOB` shows the same receipt from another machine (another HOME)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.cli.test_run import bucket_objects, project, wait_for

__all__ = ["project"]  # the fixture, shared
BILLING_PRICE = "at the Cloud Billing list price of 2026-11-01 in us-central1 (v3-8)"


def test_the_receipt_adds_up_and_another_home_sees_it(
    cli, emulator, project, tmp_path: Path, monkeypatch
) -> None:
    began = time.time()
    # a script of half a second: a faster one's phase rounds to 0.0 (kept in tenths)
    r = cli("run", str(project / "job.py"), "--json", "--env", "NAP=0.5")
    took = time.time() - began
    assert r.code == 0, r.err
    result = json.loads(r.out)
    got = result["receipt"]
    total = sum(got["seconds"].values())
    assert 0 < total <= took + 7 * 0.05  # every phase is inside the run (kept in tenths)
    assert took - total < 5  # ...and together they are all of it but its last steps
    assert got["seconds"]["script"] >= 0.4 and got["seconds"]["teardown"] >= 0
    assert got["hourlyUsd"] == 8.0  # a v3-8 at list price (tpuctl's table)
    assert f"job {result['job']}: receipt: " in r.err and BILLING_PRICE in r.err

    another_home(tmp_path / "other-home", monkeypatch)  # no state of this run
    shown = cli("jobs", result["job"], "--json")
    assert shown.code == 0, shown.err
    assert json.loads(shown.out)["receipt"] == got
    table = cli("jobs", result["job"])
    assert "receipt: " in table.out and "in us-central1 (v3-8)" in table.out
    assert emulator.nodes() == []


def another_home(root: Path, monkeypatch) -> None:  # noqa: ANN001
    """Another laptop: a HOME with no state of any run."""
    for sub in ("home", "config", "state"):
        (root / sub).mkdir(parents=True)
    monkeypatch.setenv("HOME", str(root / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(root / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(root / "state"))


def test_a_detached_jobs_receipt_is_made_once_by_the_first_to_see_it_ended(
    cli, emulator, project, tmp_path: Path, monkeypatch
) -> None:
    began = time.time()
    r = cli("run", str(project / "job.py"), "--detach", "--json", "--env", "NAP=4")
    assert r.code == 0, r.err
    job = json.loads(r.out)["job"]
    assert "receipt" not in json.loads(r.out)  # the client left: it has no receipt to give
    receipt_name = f"tpuctl/jobs/{job}/receipt.json"

    another_home(tmp_path / "laptop-a", monkeypatch)
    running = json.loads(cli("jobs", job, "--json").out)
    if running["state"] == "RUNNING":  # not yet ended: nobody can make it
        assert running["receipt"] is None
        assert receipt_name not in bucket_objects(emulator, lambda n: n == receipt_name)
    wait_for(lambda: emulator.nodes() == [], timeout=120)  # worker 0 deleted the node
    shown = cli("jobs", job, "--json")
    assert shown.code == 0, shown.err
    row = json.loads(shown.out)
    assert row["state"] == "SUCCEEDED"
    got = row["receipt"]
    assert got is not None and got["unknown"] == ["teardown"]
    assert got["seconds"]["teardown"] is None  # worker 0 deleted the node: nobody saw it go
    known = {p: s for p, s in got["seconds"].items() if s is not None}
    assert abs(sum(s for p, s in known.items() if p != "capacity") - got["billedSeconds"]) < 0.1
    statuses = bucket_objects(emulator, lambda n: f"jobs/{job}/status/" in n)
    ended = max(json.loads(v)["ended"] for v in statuses.values())
    # the parts run from `run`'s start to the job's end, as the client and agents saw them
    assert abs(sum(known.values()) - (ended - began)) < 3, (got, ended - began)
    assert known["script"] >= 4 and known["boot"] + known["start"] > 0
    assert got["hourlyUsd"] == 8.0 and got["accelerator"] == "v3-8"
    bucket = emulator.storage_client().bucket("tpuctl-demo-tpuctl")
    stored = bucket.get_blob(receipt_name).generation

    another_home(tmp_path / "laptop-b", monkeypatch)  # a second reader: the same receipt
    again = json.loads(cli("jobs", job, "--json").out)["receipt"]
    assert again == got
    assert bucket.get_blob(receipt_name).generation == stored  # written once, never again
    table = cli("jobs", job).out
    assert "billed and teardown unknown" in table and "teardown unknown" in table, table
