"""Times as the emulator writes them: seconds since the epoch (floats, the state's clock)
rendered as RFC 3339 in UTC with "Z".

`proto_timestamp` is a `google.protobuf.Timestamp` as Google's front end renders it in
proto3 JSON: 9 fractional digits (nanoseconds), none for a whole second. The TPU API's
fronts use it, so a client's parsing meets the digits the cloud sends. `rfc3339` (0, 3
or 6 digits) is for the emulator's own answers (the control plane's).
"""

from __future__ import annotations

import math
from datetime import datetime, timezone


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
