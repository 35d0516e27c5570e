"""Durations as users type them: `90s`, `30m`, `8h`, `2d`, `1h30m`."""

from __future__ import annotations

import re

from tpuctl.errors import UsageError

_PART = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str, flag: str = "duration") -> int:
    """Seconds in `text`; a bare number means seconds. UsageError when malformed or zero."""
    t = text.strip().lower()
    if re.fullmatch(r"\d+", t):
        seconds = int(t)
    elif t and _PART.sub("", t) == "":
        seconds = int(sum(float(n) * _UNIT[u] for n, u in _PART.findall(t)))
    else:
        raise UsageError(f"invalid {flag} {text!r}: use e.g. 90s, 30m, 8h, 2d or 1h30m")
    if seconds <= 0:
        raise UsageError(f"invalid {flag} {text!r}: must be more than zero")
    return seconds


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
