"""`tpuctl cost`: what the jobs of a period cost, from their receipts in the bucket, by
job, day, type and owner. The jobs are written into the emulator's bucket as tpuctl
writes them (staging.job_record, the agents' statuses, receipt.save, the marks a
detached client keeps), so the test needs no node."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import one_line_error
from tpuctl.agent import protocol
from tpuctl.cloud.clients import ClientFactory
from tpuctl.cloud.storage import Bucket
from tpuctl.services import late_receipt, receipt, staging
from tpuctl.services.names import owner_label
from tpuctl.services.receipt import Receipt

PROJECT = "tpuctl-demo"
ADA, BOB = "ada@example.com", "bob@example.com"
DAY = 86400.0


@pytest.fixture
def bucket(emulator: Any) -> Bucket:
    b = ClientFactory().bucket(staging.default_bucket_name(PROJECT), PROJECT)
    b.ensure("us-central1")
    return b


def job(
    bucket: Bucket, account: str, accelerator: str, ago: float, state: str = protocol.SUCCEEDED
) -> str:
    """A job of `account` started `ago` seconds ago, its one worker in `state`."""
    started = time.time() - ago
    spec = staging.JobSpec(
        project=PROJECT,
        zone="us-central1-a",
        node="n",
        accelerator=accelerator,
        workers=1,
        script="job.py",
        bucket=bucket.name,
        owner=owner_label(account),
        job_id=staging.new_job_id(started),
    )
    record = staging.job_record(spec, "0" * 64, Path("/work"))
    record["created_unix"] = started
    bucket.write_json(protocol.job_record_path(spec.job_id), record)
    status: dict[str, Any] = {"worker": 0, "attempt": 1, "state": state, "started": started}
    if state in protocol.FINAL:
        status.update(ended=started + 600, exit_status=0 if state == protocol.SUCCEEDED else 1)
    bucket.write_json(protocol.status_path(spec.job_id, 0), status)
    return spec.job_id


def receipt_of(
    bucket: Bucket, job_id: str, script: float, hourly: float | None, util: float
) -> Receipt:
    seconds = {p: 0.0 for p in receipt.PHASES}
    seconds.update(capacity=30.0, boot=60.0, start=20.0, environment=10.0, script=script)
    made = Receipt(seconds, hourly, util, "v3-8" if hourly else "tpu7x-8")
    receipt.save(bucket, job_id, made)
    return made


def with_price_source(bucket: Bucket, job_id: str, source: str) -> None:
    """The receipt as a client that names where its price came from writes it."""
    path = protocol.job_path(job_id, receipt.NAME)
    kept, _ = bucket.read_json(path)
    bucket.write_json(path, {**kept, "price_source": source})


def cost_json(cli: Any, *args: str) -> dict[str, Any]:
    r = cli("cost", "--json", *args)
    assert r.code == 0, r.err
    return json.loads(r.out)


def test_cost_sums_the_receipts_by_job_day_type_and_owner(
    cli: Any, emulator: Any, bucket: Bucket
) -> None:
    a1 = job(bucket, ADA, "v3-8", 3600)
    a2 = job(bucket, ADA, "v3-8", 2 * DAY)
    b1 = job(bucket, BOB, "v3-8", 3 * DAY, protocol.FAILED)
    old = job(bucket, BOB, "v3-8", 10 * DAY)  # before the period: left out
    unpriced = job(bucket, BOB, "tpu7x-8", 600)
    made = {
        a1: receipt_of(bucket, a1, 3600, 8.0, 80.0),
        a2: receipt_of(bucket, a2, 1800, 8.0, 20.0),
        b1: receipt_of(bucket, b1, 900, 8.0, 50.0),
        unpriced: receipt_of(bucket, unpriced, 300, None, 10.0),
    }
    receipt_of(bucket, old, 7200, 8.0, 90.0)
    with_price_source(bucket, a1, "Cloud Billing Catalog, 2026-12-01")

    got = cost_json(cli, "--since", "7d", "--all-owners")
    rows = {r["job"]: r for r in got["jobs"]}
    assert set(rows) == {a1, a2, b1, unpriced}
    priced = [made[j].cost() or 0.0 for j in (a1, a2, b1)]
    assert got["total"]["costUsd"] == pytest.approx(sum(priced), abs=1e-3)
    assert got["total"]["billedSeconds"] == pytest.approx(
        sum(m.billed for m in made.values()), abs=0.5
    )
    assert got["unpriced_jobs"] == 1 and rows[unpriced]["costUsd"] is None
    assert rows[b1]["status"] == "failed" and rows[a1]["status"] == "finished"
    assert rows[a1]["priceSource"] == "Cloud Billing Catalog, 2026-12-01"
    assert rows[a2]["priceSource"] is None
    # idle: billed x (100 - util)%; overhead: the phases other than the script and capacity
    assert rows[a2]["idleSeconds"] == pytest.approx(made[a2].billed * 0.8, abs=0.1)
    assert rows[a1]["overheadSeconds"] == pytest.approx(90.0)
    owners = got["by_owner"]
    assert set(owners) == {owner_label(ADA), owner_label(BOB)}
    assert owners[owner_label(ADA)]["costUsd"] == pytest.approx(priced[0] + priced[1], abs=1e-3)
    assert owners[owner_label(BOB)]["unpricedJobs"] == 1
    assert sum(d["costUsd"] for d in got["by_day"].values()) == pytest.approx(sum(priced), abs=1e-3)
    assert set(got["by_type"]) == {"v3-8", "tpu7x-8"}

    mine = cost_json(cli, "--since", "7d", "--owner", BOB)
    assert {r["job"] for r in mine["jobs"]} == {b1, unpriced}
    longer = cost_json(cli, "--since", "30d", "--all-owners")
    assert old in {r["job"] for r in longer["jobs"]}

    table = cli("cost", "--since", "7d", "--all-owners")
    assert table.code == 0, table.err
    assert a1 in table.out and "TOTAL" in table.out and f"${sum(priced):,.2f}" in table.out
    assert "1 job(s) with no public price not included" in table.err
    assert "\x1b[" not in table.out
    assert "Cloud Billing" not in table.out  # the price's source: --json only


def test_a_running_job_costs_so_far_and_a_bad_receipt_is_skipped(
    cli: Any, emulator: Any, bucket: Bucket
) -> None:
    running = job(bucket, ADA, "v3-8", 7200, protocol.RUNNING)
    now = time.time()
    marks = {"begin": now - 7300, "created": now - 7200, "ready": now - 7100, "started": now - 7000}
    late_receipt.save_marks(bucket, running, marks, 8.0, "v3-8")
    bad = job(bucket, ADA, "v3-8", 600)
    bucket.write_json(protocol.job_path(bad, receipt.NAME), {"version": 1, "seconds": "lots"})

    r = cli("cost", "--json", "--all-owners")
    assert r.code == 0, r.err
    rows = {x["job"]: x for x in json.loads(r.out)["jobs"]}
    assert rows[running]["status"] == "running"
    assert 7200 <= rows[running]["billedSeconds"] < 7200 + 120
    assert rows[running]["costUsd"] == pytest.approx(16.0, abs=0.3)
    assert rows[bad]["costUsd"] is None and "no receipt" in rows[bad]["status"]
    notes = [x for x in r.err.splitlines() if bad in x]
    assert len(notes) == 1 and "not a receipt" in notes[0], r.err
    assert "Traceback" not in r.err


def test_the_default_is_your_own_jobs_and_a_bad_since_is_one_line(
    cli: Any, emulator: Any, bucket: Bucket
) -> None:
    emulator.config(caller=ADA)
    mine = job(bucket, ADA, "v3-8", 60)
    receipt_of(bucket, mine, 60, 8.0, 50.0)
    receipt_of(bucket, job(bucket, BOB, "v3-8", 60), 60, 8.0, 50.0)
    assert [x["job"] for x in cost_json(cli)["jobs"]] == [mine]

    r = cli("cost", "--since", "abc")
    assert r.code == 2 and "--since" in one_line_error(r) and "'abc'" in r.err
    assert r.out == ""
    r = cli("cost", "--owner", ADA, "--all-owners")
    assert r.code == 2 and "exclusive" in one_line_error(r)
