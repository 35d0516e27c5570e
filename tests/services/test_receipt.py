"""The receipt's arithmetic: phases that add up to the node's life, priced at list price
where billed, and a receipt from the bucket read as data only."""

from __future__ import annotations

import math

import pytest

from tpuctl.services import receipt

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
