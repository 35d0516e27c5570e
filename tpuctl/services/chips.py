"""The chips of a running job, live, as its agents put them in their statuses
(agent/chips.py: HBM used and total and duty cycle of each chip, from libtpu's runtime
metrics on each worker). A status is shared ground: what is not a well-formed figure
is left out, and a worker's list is cut at MOST_CHIPS."""

from __future__ import annotations

import time
from typing import Any

from tpuctl.agent import protocol

MOST_CHIPS = 64  # a TPU VM has at most 8 chips; more is not an agent's status
_FIGURES = {"hbm_used": "hbmUsed", "hbm_total": "hbmTotal", "duty_cycle": "dutyCycle"}


def _number(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and value >= 0
    return float(value) if ok else None


def _chip(item: Any) -> dict[str, Any] | None:
    if not isinstance(item, dict) or not isinstance(item.get("chip"), int):
        return None
    row: dict[str, Any] = {"chip": item["chip"]}
    for key, name in _FIGURES.items():
        value = _number(item.get(key))
        row[name] = None if value is None else (value if key == "duty_cycle" else int(value))
    return row


def job_chips(st: dict[int, dict[str, Any]], now: float | None = None) -> list[dict[str, Any]]:
    """Per running worker that reported its chips: `{worker, source, address, at, age,
    error, chips: [{chip, hbmUsed, hbmTotal, dutyCycle}]}` (bytes, percent)."""
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
