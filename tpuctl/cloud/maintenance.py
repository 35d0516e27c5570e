"""`upcomingMaintenance` as both APIs write it, read into tpuctl's `Maintenance`: the Cloud
TPU API's Node (v2 REST, https://cloud.google.com/tpu/docs/reference/rest/v2/projects.locations.nodes)
and Compute Engine's `Instance.resourceStatus`
(https://cloud.google.com/compute/docs/reference/rest/v1/instances) carry the same
message: `type`, `canReschedule`, `windowStartTime`, `windowEndTime`,
`maintenanceStatus`."""

from __future__ import annotations

from typing import Any

from tpuctl.host_maintenance import Maintenance
from tpuctl.timestamps import parse_rfc3339


def _seconds(value: Any) -> float | None:
    try:
        return parse_rfc3339(str(value)).timestamp() if value else None
    except ValueError:
        return None


def from_json(data: Any) -> Maintenance | None:
    """The maintenance an `upcomingMaintenance` object announces; None when there is none
    (absent, empty, or not an object)."""
    if not isinstance(data, dict) or not data:
        return None
    return Maintenance(
        kind=str(data.get("type") or "SCHEDULED"),
        can_reschedule=bool(data.get("canReschedule")),
        window_start=_seconds(data.get("windowStartTime")),
        window_end=_seconds(data.get("windowEndTime")),
        status=str(data.get("maintenanceStatus") or "PENDING"),
    )


def first(found: list[Maintenance | None]) -> Maintenance | None:
    """A slice's maintenance from its VMs': an ongoing one first, else the earliest."""
    known = [m for m in found if m is not None]
    return min(
        known,
        key=lambda m: (not m.ongoing, m.window_start if m.window_start is not None else 0.0),
        default=None,
    )
