"""Resource keys as gcloud names them: a dotted path into a row (`labels.env`,
`networkEndpoints[0].ipAddress`), shared by --format, --sort-by and --filter."""

from __future__ import annotations

import re
from typing import Any

_MISSING = object()
KEY = re.compile(r"[A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*|\[\d+\])*")


def lookup(row: Any, key: str) -> Any:
    """The value at a dotted key (`labels.env`, `networkEndpoints[0].ipAddress`), or
    _MISSING."""
    value = row
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", key):
        if part.startswith("["):
            i = int(part[1:-1])
            if not isinstance(value, list) or i >= len(value):
                return _MISSING
            value = value[i]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return _MISSING
    return value


def missing(value: Any) -> bool:
    return value is _MISSING or value is None
