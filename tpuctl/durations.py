"""Durations as users type them: `90s`, `30m`, `8h`, `2d`, `1h30m`; at most a year."""

from __future__ import annotations

import re

from tpuctl.errors import UsageError

_PART = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_SECONDS = 365 * 86400
"""The longest duration any flag takes: a TTL, a timeout or a deadline past a year is a
typo, and a number that large overflows the clocks it is added to."""


def parse_duration(text: str, flag: str = "duration") -> int:
    """Seconds in `text`; a bare number means seconds. UsageError when malformed, zero or
    more than MAX_SECONDS."""
    t = text.strip().lower()
    if re.fullmatch(r"\d+", t):
        seconds: float = int(t)
    elif t and _PART.sub("", t) == "":
        seconds = sum(float(n) * _UNIT[u] for n, u in _PART.findall(t))  # inf when huge
    else:
        raise UsageError(f"invalid {flag} {text!r}: use e.g. 90s, 30m, 8h, 2d or 1h30m")
    if seconds > MAX_SECONDS:
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise UsageError(
            f"invalid {flag} {shown!r}: at most {format_duration(MAX_SECONDS)} (one year)"
        )
    if int(seconds) <= 0:
        raise UsageError(f"invalid {flag} {text!r}: must be more than zero")
    return int(seconds)


def format_duration(seconds: float) -> str:
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        h, m = divmod(s // 60, 60)
        return f"{h}h{m:02d}m" if m else f"{h}h"
    d, h = divmod(s // 3600, 24)
    return f"{d}d{h}h" if h else f"{d}d"


def parse_seconds(
    text: str, flag: str, minimum: float = 0.0, maximum: float = MAX_SECONDS
) -> float:
    """Seconds in `text` for a flag that takes fractions or zero (`--interval 0.5`,
    `--notice 0`): a bare number is seconds, else a duration as parse_duration reads it
    (`90s`, `1m`, `1h30m`). UsageError when malformed or outside [minimum, maximum]."""
    t = text.strip().lower()
    if re.fullmatch(r"\d+(?:\.\d+)?", t):
        seconds = float(t)
    elif t and _PART.sub("", t) == "":
        seconds = sum(float(n) * _UNIT[u] for n, u in _PART.findall(t))
    else:
        raise UsageError(
            f"invalid {flag} {text!r}: use e.g. 30s, 5m or 1h30m (a bare number is seconds)"
        )
    if seconds < minimum:
        raise UsageError(f"invalid {flag} {text!r}: at least {minimum:g}s")
    if seconds > maximum:
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise UsageError(f"invalid {flag} {shown!r}: at most {format_duration(maximum)}")
    return seconds
