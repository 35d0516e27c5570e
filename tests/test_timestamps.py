"""Timestamps in the forms Google's APIs write them (proto3 JSON: 0, 3, 6 or 9 digits)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from tpuctl.timestamps import parse_rfc3339


@pytest.mark.parametrize(
    ("text", "micro"),
    [
        ("2026-12-01T09:30:05Z", 0),
        ("2026-12-01T09:30:05.123Z", 123000),
        ("2026-12-01T09:30:05.123456Z", 123456),
        ("2026-12-01T09:30:05.123456789Z", 123456),  # what fromisoformat refuses on 3.10
        ("2026-12-01t09:30:05.5z", 500000),
    ],
)
def test_every_fraction_the_wire_carries(text: str, micro: int) -> None:
    assert parse_rfc3339(text) == datetime(2026, 12, 1, 9, 30, 5, micro, tzinfo=timezone.utc)


def test_an_offset_is_turned_into_utc_and_no_zone_means_utc() -> None:
    assert parse_rfc3339("2026-12-01T01:30:05.000000001-08:00") == datetime(
        2026, 12, 1, 9, 30, 5, tzinfo=timezone.utc
    )
    assert parse_rfc3339("2026-12-01T09:30:05+0100").hour == 8
    assert parse_rfc3339("2026-12-01T09:30:05").tzinfo == timezone.utc


@pytest.mark.parametrize("text", ["", "yesterday", "2026-12-01", "2026-12-01T09:30:05.Z"])
def test_what_is_not_a_time_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_rfc3339(text)
