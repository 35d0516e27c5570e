"""Timestamps as Google's APIs write them, read on every Python tpuctl supports.

proto3's JSON mapping writes a Timestamp as RFC 3339 with "Z" and 0, 3, 6 or 9
fractional digits (https://protobuf.dev/programming-guides/json/), and some services
answer with an offset instead of "Z". `datetime.fromisoformat` takes 9 digits and "Z" only
from Python 3.11; tpuctl supports 3.10, so the fraction is cut to microseconds here.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

_RFC3339 = re.compile(
    r"(?P<base>\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(?::\d{2})?)"
    r"(?:\.(?P<fraction>\d+))?"
    r"(?P<zone>[Zz]|[+-]\d{2}:?\d{2})?"
)


def parse_rfc3339(value: str) -> datetime:
    """`2026-12-01T09:00:00.123456789Z` -> an aware datetime (UTC when no zone is given;
    nanoseconds are cut to microseconds). ValueError when `value` is not such a time."""
    match = _RFC3339.fullmatch(value.strip())
    if match is None:
        raise ValueError(f"not an RFC 3339 time: {value!r}")
    fraction = (match["fraction"] or "")[:6].ljust(6, "0")
    zone = match["zone"] or "+00:00"
    if zone in ("Z", "z"):
        zone = "+00:00"
    elif ":" not in zone:
        zone = f"{zone[:3]}:{zone[3:]}"
    base = match["base"].replace("t", "T").replace(" ", "T")
    when = datetime.fromisoformat(f"{base}.{fraction}{zone}")
    return when.astimezone(timezone.utc)


def utc_clock(seconds: float) -> str:
    """A moment as a wall clock in UTC, `21:30 UTC` (with the date when not today)."""
    import time

    when, today = time.gmtime(seconds), time.gmtime()
    if when[:3] == today[:3]:
        return time.strftime("%H:%M UTC", when)
    return time.strftime("%Y-%m-%d %H:%M UTC", when)
