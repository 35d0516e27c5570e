"""The chips of a running job, live, as its agents put them in their statuses
(agent/chips.py: HBM used and total, duty cycle and TensorCore utilisation of each chip,
from libtpu's runtime metrics and SDK on each worker). A status is shared ground: what is
not a well-formed figure (percent: 0 to 100) is left out, and a worker's list is cut at
MOST_CHIPS."""

from __future__ import annotations

import math
import time
from typing import Any

from tpuctl.agent import protocol

MOST_CHIPS = 64  # a TPU VM has at most 8 chips; more is not an agent's status
_FIGURES = {
    "hbm_used": "hbmUsed",
    "hbm_total": "hbmTotal",
    "duty_cycle": "dutyCycle",
    "tensorcore_util": "tensorcoreUtilization",
}
_PERCENT = {"duty_cycle", "tensorcore_util"}


def _number(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and value >= 0
    ok = ok and math.isfinite(value)  # json reads Infinity too
    return float(value) if ok else None


def _chip(item: Any) -> dict[str, Any] | None:
    if not isinstance(item, dict) or not isinstance(item.get("chip"), int):
        return None
    row: dict[str, Any] = {"chip": item["chip"]}
    for key, name in _FIGURES.items():
        value = _number(item.get(key))
        if key in _PERCENT:
            row[name] = value if value is not None and value <= 100.0 else None
        else:
            row[name] = None if value is None else int(value)
    return row


def job_chips(st: dict[int, dict[str, Any]], now: float | None = None) -> list[dict[str, Any]]:
    """Per running worker that reported its chips: `{worker, source, address, at, age,
    error, chips: [{chip, hbmUsed, hbmTotal, dutyCycle, tensorcoreUtilization}]}` (bytes,
    percent; None: not read)."""
    now = time.time() if now is None else now
    out = []
    for worker, status in sorted(st.items()):
        seen = status.get("chips")
        if status.get("state") != protocol.RUNNING or not isinstance(seen, dict):
            continue
        at = _number(seen.get("at"))
        listed = seen.get("chips")
        listed = listed if isinstance(listed, list) else []
        chips = [c for c in map(_chip, listed[:MOST_CHIPS]) if c is not None]
        error = seen.get("error")
        out.append(
            {
                "worker": worker,
                "source": str(seen.get("source", ""))[:40],
                "address": str(seen.get("address", ""))[:100],
                "at": at,
                "age": None if at is None else round(max(0.0, now - at), 1),
                "error": str(error)[:300] if error else None,
                "chips": chips,
            }
        )
    return out
