"""Cost estimates and duration parsing."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from tpuctl.catalog import shape
from tpuctl.durations import format_duration, parse_duration, parse_seconds
from tpuctl.errors import ConfigError, UsageError
from tpuctl.models import Node
from tpuctl.services import cost
from tpuctl.services.prices import Book

TABLE = Book(reason="not asked")  # tpuctl's built-in table alone


def node(
    acc: str,
    state: str = "READY",
    spot: bool = False,
    age_h: float = 2.0,
    labels: dict[str, str] | None = None,
) -> Node:
    created = datetime.fromtimestamp(1_000_000 - age_h * 3600, tz=timezone.utc)
    return Node(
        name="n",
        project="p",
        zone="us-central1-a",
        labels=labels or {},
        accelerator_type=acc,
        state=state,
        spot=spot,
        create_time=created,
    )


def hourly(name: str, cheap: bool, zone: str = "us-central1-a") -> float | None:
    return cost.hourly(shape(name), cheap, zone, TABLE)


def test_hourly_by_generation_scheduling_and_region() -> None:
    assert hourly("v4-32", False, "us-central2-b") == pytest.approx(16 * 3.22)  # 16 chips
    assert hourly("v5litepod-8", True) == pytest.approx(8 * 0.213)
    assert hourly("v6e-256", False) == pytest.approx(256 * 2.70)
    # regions differ: v6e is 3.24 a chip-hour in asia-northeast1, 2.70 in us-central1
    assert hourly("v6e-8", False, "asia-northeast1-b") == pytest.approx(8 * 3.24)
    # v2 and v3 pods have their own price: a v2-32 (16 chips) at 1.50, a v2-8 at 1.125
    assert hourly("v2-32", False) == pytest.approx(16 * 1.50)
    assert hourly("v2-8", False) == pytest.approx(4 * 1.125)
    assert hourly("v9-8", False) is None
    assert hourly("tpu7x-8", False) is None  # no public price
    # a region with no row: the generation's first region's price, which says so
    found = cost.rate(shape("v6e-8"), False, "me-west1-a", TABLE)
    assert found is not None and found.price.region == "us-central1"
    assert "at us-central1's price: none for me-west1" in cost.where(found, "me-west1-a")


def test_stopped_nodes_cost_nothing_now_and_so_far_counts_only_the_time_run() -> None:
    assert cost.node_hourly(node("v3-8", "STOPPED"), TABLE) == 0.0
    assert cost.node_hourly(node("v3-8", spot=True), TABLE) == pytest.approx(4 * 0.51)
    assert cost.so_far(node("v3-8", age_h=3), now=1_000_000, book=TABLE) == pytest.approx(24.0)
    # stopped by `tpuctl stop` after an hour of running: $8 so far, however long ago
    stopped = node("v3-8", "STOPPED", age_h=30, labels={"tpuctl-ran": "3600"})
    for now in (1_000_000, 1_000_000 + 86_400):
        assert cost.so_far(stopped, now=now, book=TABLE) == pytest.approx(8.0)
    # started again 30 minutes ago: the hour before, and the half hour since
    again = node("v3-8", labels={"tpuctl-ran": "3600", "tpuctl-started": str(1_000_000 - 1800)})
    assert cost.so_far(again, now=1_000_000, book=TABLE) == pytest.approx(12.0)
    # stopped outside tpuctl, nobody kept how long it ran: not known, never a growing guess
    assert cost.so_far(node("v3-8", "STOPPED", age_h=30), now=1_000_000, book=TABLE) is None
    # a reserved node is billed through its reservation: its price is not known here
    reserved = node("v3-8")
    reserved.reserved = True
    assert cost.node_hourly(reserved, TABLE) is None
    assert cost.so_far(reserved, now=1_000_000, book=TABLE) is None


def test_config_overrides_prices() -> None:
    table = cost.price_table({"prices": {"v3": {"on_demand": 1.5}, "tpu7x": {"spot": 0.5}}})
    assert table["v3"] == (1.5, None)
    got = cost.hourly(shape("v3-8"), False, "us-central1-a", TABLE, table)
    assert got == pytest.approx(6.0)
    spot = cost.hourly(shape("v3-8"), True, "us-central1-a", TABLE, table)
    assert spot == pytest.approx(4 * 0.51)  # the table's spot price still holds
    tpu7x = cost.hourly(shape("tpu7x-8"), True, "us-central1-a", TABLE, table)
    assert tpu7x == pytest.approx(4 * 0.5)  # 4 chips at your own price
    with pytest.raises(ConfigError, match="invalid prices.bogus"):  # never ignored silently
        cost.price_table({"prices": {"v3": {"on_demand": 1.5}, "bogus": {"spot": 1}}})


def test_money() -> None:
    assert cost.money(8.0, per_hour=True) == "$8.00/h"
    assert cost.money(0.0123) == "$0.012"
    assert cost.money(1234.5) == "$1,234.50"
    assert cost.money(None) == "n/a"  # never "-", which reads like nothing owed


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90),
        ("90s", 90),
        ("30m", 1800),
        ("8h", 28800),
        ("2d", 172800),
        ("1h30m", 5400),
        ("1.5h", 5400),
        ("365d", 365 * 86400),
        ("31536000", 365 * 86400),
    ],
)
def test_parse_duration(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text", ["", "soon", "5x", "h", "0m", "-5m", "366d", "8761h", "9" * 400, "9" * 400 + "d"]
)
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(UsageError):
        parse_duration(text, "--ttl")


def test_format_duration() -> None:
    assert [format_duration(s) for s in (5, 120, 3600, 5400, 90000, 86400)] == [
        "5s",
        "2m",
        "1h",
        "1h30m",
        "1d1h",
        "1d",
    ]


@pytest.mark.parametrize(
    ("text", "seconds"), [("0.5", 0.5), ("30", 30.0), ("0", 0.0), ("1m", 60.0), ("1m30s", 90.0)]
)
def test_parse_seconds_takes_fractions_zero_and_durations(text: str, seconds: float) -> None:
    assert parse_seconds(text, "--interval") == seconds


@pytest.mark.parametrize(
    ("text", "minimum", "maximum", "says"),
    [("0.1", 0.5, 60, "at least 0.5s"), ("2h", 0, 3600, "at most 1h"), ("soon", 0, 60, "e.g. 30s")],
)
def test_parse_seconds_rejects(text: str, minimum: float, maximum: float, says: str) -> None:
    with pytest.raises(UsageError, match=f"--notice {text!r}.*{says}"):
        parse_seconds(text, "--notice", minimum, maximum)


def test_a_max_cost_is_a_deadline_at_the_shapes_price() -> None:
    from tpuctl.cloud import compute as compute_api
    from tpuctl.cloud.compute.wire import instance_body
    from tpuctl.models import CreateSpec
    from tpuctl.services.node_create import prepare

    assert cost.parse_dollars("$12.50") == 12.5
    assert cost.cap_seconds(shape("v3-8"), False, 50) == (22500, 8.0)  # 6h15m at $8.00/h
    assert cost.cap_seconds(shape("v3-8"), True, 2.04) == (3600, 2.04)  # spot: $2.04/h
    spec = prepare(CreateSpec("n", shape("v3-8"), max_cost=50, ttl=3600, owner="me"), now=1000)
    assert spec.labels["tpuctl-cost-deadline"] == str(1000 + 22500)
    assert spec.labels["tpuctl-expires"] == str(1000 + 3600)  # the TTL comes first
    assert "startup-script" in spec.metadata  # the watchdog enforces it on the node
    # On Compute Engine the instance's own run duration does, with no watchdog.
    spec_there = CreateSpec(name="n", shape=shape("v3-8"), max_cost=50, owner="me")
    compute = prepare(spec_there, 1000, compute_api.KIND)
    assert "startup-script" not in compute.metadata
    scheduling = instance_body(compute, "us-central1-a")["scheduling"]
    assert scheduling["maxRunDuration"] == {"seconds": "22500"}
    assert scheduling["instanceTerminationAction"] == "DELETE"


def test_a_max_cost_needs_a_price() -> None:
    with pytest.raises(UsageError, match="--max-cost needs a price for v99-8"):
        cost.cap_seconds(shape("v99-8"), False, 50)
