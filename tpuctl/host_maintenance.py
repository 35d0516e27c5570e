"""A host maintenance announced on a node, as tpuctl's models hold it (`Node.maintenance`):
plain data, read from either API by `cloud/maintenance.py`."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any


@dataclass(frozen=True)
class Maintenance:
    """A host maintenance the API announced on a node (`upcomingMaintenance`, the same
    message on the Cloud TPU API's Node and Compute Engine's instance `resourceStatus`):
    SCHEDULED or UNSCHEDULED, whether it can be started early, its window (epoch
    seconds), PENDING before the window and ONGOING in it."""

    kind: str
    can_reschedule: bool
    window_start: float | None
    window_end: float | None
    status: str

    @property
    def ongoing(self) -> bool:
        return self.status == "ONGOING"

    def window(self) -> str:
        """`2026-12-07 14:00-15:00 UTC` (the end's date too when it is another day)."""
        if self.window_start is None:
            return "window not given"
        start = time.gmtime(self.window_start)
        text = time.strftime("%Y-%m-%d %H:%M", start)
        if self.window_end is not None:
            end = time.gmtime(self.window_end)
            text += time.strftime("-%H:%M" if end[:3] == start[:3] else " to %Y-%m-%d %H:%M", end)
        return text + " UTC"

    def summary(self) -> str:
        """`scheduled, 2026-12-07 14:00-15:00 UTC, pending, can be rescheduled`."""
        moved = "can be rescheduled" if self.can_reschedule else "cannot be rescheduled"
        return f"{self.kind.lower()}, {self.window()}, {self.status.lower()}, {moved}"

    def to_json(self) -> dict[str, Any]:
        def stamp(at: float | None) -> str | None:
            if at is None:
                return None
            return datetime.fromtimestamp(at, timezone.utc).isoformat().replace("+00:00", "Z")

        return {
            "type": self.kind,
            "canReschedule": self.can_reschedule,
            "windowStartTime": stamp(self.window_start),
            "windowEndTime": stamp(self.window_end),
            "maintenanceStatus": self.status,
        }
