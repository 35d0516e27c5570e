"""The receipt's arithmetic: phases that add up to the node's life, priced at list price
where billed, and a receipt from the bucket read as data only."""

from __future__ import annotations

import math

import pytest

from tpuctl.services import late_receipt, receipt

MARKS = {"begin": 100.0, "created": 130.0, "ready": 170.0, "started": 175.0,
         "ended": 3875.0, "gone": 3887.0}  # fmt: skip


def test_the_phases_add_up_to_the_nodes_life_and_capacity_is_not_billed() -> None:
    r = receipt.of_marks(MARKS, recovery=100.0, environment=20.0, hourly=8.0, accelerator="v3-8")
    assert r.seconds == {"capacity": 30.0, "boot": 40.0, "start": 5.0, "environment": 20.0,
                         "script": 3580.0, "recovery": 100.0, "teardown": 12.0}  # fmt: skip
    assert sum(r.seconds.values()) == MARKS["gone"] - MARKS["begin"]
    assert r.billed == MARKS["gone"] - MARKS["created"]
    assert r.cost("capacity") == 0.0
    assert math.isclose(r.cost() or 0, 8.0 * r.billed / 3600)
    line = r.lines()[0]
    assert line.startswith("receipt: 1h02m billed, $8.35 at list price (v3-8): ")
    assert "capacity 30s, boot 40s $0.09," in line and "teardown 12s $0.03" in line


def test_clocks_that_disagree_never_make_a_phase_negative() -> None:
    # the cloud's create time after the node was READY by the laptop's clock
    r = receipt.of_marks({**MARKS, "created": 9999.0}, 0.0, 5000.0, None, "tpu7x-8")
    assert min(r.seconds.values()) >= 0
    assert r.seconds["environment"] == MARKS["ended"] - MARKS["started"]  # capped
    assert "no public price (tpu7x-8)" in r.lines()[0]


@pytest.mark.parametrize(("util", "advised"), [(12.0, True), (30.0, False), (None, False)])
def test_advice_only_for_chips_mostly_idle(util: float | None, advised: bool) -> None:
    r = receipt.of_marks(MARKS, 0.0, 0.0, 8.0, "v3-8")
    r.util = util
    assert (r.advice() is not None) is advised
    assert (len(r.lines()) == 2) is advised


def test_a_receipt_from_the_bucket_round_trips_and_junk_is_left_out() -> None:
    r = receipt.of_marks(MARKS, 0.0, 20.0, 8.0, "v3-8")
    again = receipt.from_json(r.to_json())
    assert again is not None and again.lines() == r.lines()
    for junk in (None, [], {"version": 1}, {"version": 2, "seconds": {}},
                 {"version": 1, "seconds": {"script": -5}},
                 {"version": 1, "seconds": {"script": "nan"}},
                 {"version": 1, "seconds": {"script": 1}, "hourlyUsd": "x"}):  # fmt: skip
        assert receipt.from_json(junk) is None, junk


def test_an_image_jobs_receipt_names_its_digest_short_and_keeps_it_whole() -> None:
    r = receipt.of_marks(MARKS, 0.0, 0.0, 8.0, "v3-8")
    r.image = "us-docker.pkg.dev/p/r/trainer@sha256:" + "ab12" * 16
    assert r.lines()[-1] == "receipt: image us-docker.pkg.dev/p/r/trainer@sha256:ab12ab12ab12"
    again = receipt.from_json(r.to_json())
    assert again is not None and again.image == r.image and again.lines() == r.lines()
    # the bucket is shared ground: a value that names no digest is left out
    for junk in (7, "trainer:latest", ["x"]):
        junked = receipt.from_json({**r.to_json(), "image": junk})
        assert junked is not None and junked.image == ""


STATUSES = {
    0: {"state": "SUCCEEDED", "attempt": 1, "ended": 3875.0, "environment": {"seconds": 20.0}},
    1: {"state": "SUCCEEDED", "attempt": 1, "ended": 3870.0},
}
SEEN = {k: MARKS[k] for k in late_receipt.KEPT}  # what a detaching client saw


def test_a_detached_jobs_receipt_leaves_the_unseen_teardown_unknown() -> None:
    r = late_receipt.of_statuses(SEEN, 8.0, "v3-8", STATUSES, kept=False)
    assert r is not None
    assert r.seconds == {"capacity": 30.0, "boot": 40.0, "start": 5.0, "environment": 20.0,
                         "script": 3680.0, "recovery": 0.0, "teardown": None}  # fmt: skip
    assert r.unknown == ["teardown"] and r.billed == MARKS["ended"] - MARKS["created"]
    assert r.cost("teardown") is None and math.isclose(r.cost() or 0, 8.0 * r.billed / 3600)
    line = r.lines()[0]
    assert line.startswith("receipt: 1h02m billed and teardown unknown, $8.32 at list price")
    assert line.endswith("script 1h01m $8.18, teardown unknown")
    again = receipt.from_json(r.to_json())
    assert again is not None and again.seconds == r.seconds and again.lines() == r.lines()
    kept = late_receipt.of_statuses(SEEN, 8.0, "v3-8", STATUSES, kept=True)
    assert kept is not None and kept.seconds["teardown"] == 0.0 and not kept.unknown


def test_no_receipt_while_a_worker_has_not_ended() -> None:
    running = {**STATUSES, 1: {"state": "RUNNING", "attempt": 1}}
    assert late_receipt.of_statuses(SEEN, 8.0, "v3-8", running, kept=False) is None


class Bucket:
    """One JSON object where the client keeps its marks."""

    name = "b"

    def __init__(self, value: object) -> None:
        self.value = value

    def read_json(self, path: str) -> tuple[object, int]:
        assert path.endswith("/marks.json")
        return self.value, 1


def test_marks_from_the_bucket_are_read_as_data_and_junk_is_left_out() -> None:
    good = {"version": 1, "marks": SEEN, "hourlyUsd": 8.0, "accelerator": "v3-8"}
    assert late_receipt.read_marks(Bucket(good), "j") == (SEEN, 8.0, "v3-8")  # type: ignore[arg-type]
    for junk in (None, [], {**good, "version": 2}, {**good, "marks": []},
                 {**good, "marks": {**SEEN, "begin": -1}},
                 {**good, "marks": {**SEEN, "ready": float("inf")}},
                 {**good, "marks": {"begin": 1.0}},  # no `started`: the agents never ran
                 {**good, "hourlyUsd": "8"}, {**good, "accelerator": "x" * 200}):  # fmt: skip
        assert late_receipt.read_marks(Bucket(junk), "j") is None, junk  # type: ignore[arg-type]


@pytest.mark.parametrize("each", [10.6, 10.4, 10.5, 0.4, 19.7])
def test_the_parts_shown_add_up_to_the_billed_total_shown(each: float) -> None:
    seconds = {"capacity": 3.6, "boot": each, "start": each, "script": each, "teardown": 0.0}
    line = receipt.Receipt(seconds, 8.0, None, "v3-8").lines()[0]
    total = int(line.split("receipt: ")[1].split("s billed")[0])
    assert total == round(3 * each)
    parts = dict(p.split()[:2] for p in line.split("): ")[1].split(", "))
    assert parts.pop("capacity") == "4s"  # not billed: rounded alone
    assert sum(int(v.rstrip("s")) for v in parts.values()) == total, line
