"""Times as the emulator writes them: seconds since the epoch (floats, the state's clock)
rendered as RFC 3339 in UTC with "Z".

`proto_timestamp` is a `google.protobuf.Timestamp` as Google's front end renders it in
proto3 JSON: 9 fractional digits (nanoseconds), none for a whole second. The TPU API's
fronts use it, so a client's parsing meets the digits the cloud sends. `rfc3339` (0, 3
or 6 digits) is for the emulator's own answers (the control plane's). `parse_rfc3339`
reads what a request sends: proto3's JSON mapping writes a Timestamp as RFC 3339 with "Z"
and 0, 3, 6 or 9 fractional digits (https://protobuf.dev/programming-guides/json/), and
`datetime.fromisoformat` takes 9 digits and "Z" only from Python 3.11.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone

_RFC3339 = re.compile(
    r"(?P<base>\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(?::\d{2})?)"
    r"(?:\.(?P<fraction>\d+))?"
    r"(?P<zone>[Zz]|[+-]\d{2}:?\d{2})?"
)


def proto_timestamp(ts: float) -> str:
    """`1796117405.123456789` -> `2026-12-01T09:30:05.123456789Z` (`...05Z` when whole)."""
    when = datetime.fromtimestamp(ts, timezone.utc)
    nanos = round((ts - math.floor(ts)) * 1_000_000_000)
    if nanos // 1000 != when.microsecond:  # the float was rounded to the next microsecond
        nanos = when.microsecond * 1000
    fraction = f".{nanos:09d}" if nanos else ""
    return when.strftime("%Y-%m-%dT%H:%M:%S") + fraction + "Z"


def rfc3339(ts: float) -> str:
    """Seconds since the epoch -> `2026-11-29T14:26:13.123456Z`, with 0, 3 or 6 digits
    of fraction (`...13Z`, `...13.120Z`)."""
    when = datetime.fromtimestamp(ts, timezone.utc)
    micros = when.microsecond
    fraction = (
        "" if not micros else f".{micros // 1000:03d}" if not micros % 1000 else f".{micros:06d}"
    )
    return when.strftime("%Y-%m-%dT%H:%M:%S") + fraction + "Z"


def parse_rfc3339(value: str) -> datetime:
    """`2026-12-01T09:00:00.123456789Z` -> an aware datetime in UTC (UTC when no zone is
    given; nanoseconds cut to microseconds). ValueError when `value` is not such a time."""
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
    return datetime.fromisoformat(f"{base}.{fraction}{zone}").astimezone(timezone.utc)
