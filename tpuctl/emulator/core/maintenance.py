"""A host maintenance announced on one VM (a TPU API node's, or a Compute Engine
instance's), as both APIs and the VM's metadata server show it.

A maintenance is a window: announced (`maintenanceStatus` PENDING) `notice` seconds
before it starts; at its start it is ONGOING and the guest of a VM that stops for it
(`onHostMaintenance: TERMINATE`, every TPU VM) sees `instance/maintenance-event`
`TERMINATE_ON_HOST_MAINTENANCE` and gets Compute Engine's ACPI soft off (SIGTERM to its
processes) for `soft_off` seconds; then the VM is down until the window's end, when it
comes back if it would restart on its own, and the maintenance is over.

The record is a plain dict on the node or instance (so the state file keeps it), its
`phase` set by the services' ticks: PENDING, SHUTDOWN (ONGOING, the guest being shut
down), DOWN (ONGOING, the VM stopped). Its fields in the APIs' names, from the v1
`UpcomingMaintenance` message of both APIs (tpu.v2.json's schema `UpcomingMaintenance`;
Compute's `Instance.resourceStatus.upcomingMaintenance`,
https://cloud.google.com/compute/docs/reference/rest/v1/instances): `type` SCHEDULED or
UNSCHEDULED, `canReschedule`, `windowStartTime`, `windowEndTime`,
`latestWindowStartTime`, `maintenanceStatus` PENDING or ONGOING. The metadata server's
`instance/upcoming-maintenance` spells the same in snake case, every value a string
("Monitor and plan for a host maintenance event",
https://cloud.google.com/compute/docs/instances/monitor-plan-host-maintenance-event, whose
example shows `can_reschedule: "true"`, `latest_window_start_time`, `maintenance_status`,
`type`, `window_end_time`, `window_start_time`, and `{ }` when none is scheduled).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from tpuctl.emulator.core import errors
from tpuctl.emulator.core.timestamps import proto_timestamp

TYPES = ("SCHEDULED", "UNSCHEDULED")
DEFAULT_DURATION = 60.0
MAX_SECONDS = 7 * 86400.0
SOFT_OFF = 30.0  # Compute Engine's soft-off window for a spot VM (120 s: standard)
TERMINATE_EVENT = "TERMINATE_ON_HOST_MAINTENANCE"
MIGRATE_EVENT = "MIGRATE_ON_HOST_MAINTENANCE"


def _seconds(name: str, value: Any, default: float) -> float:
    if value is None:
        return default
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not (number and 0 <= value <= MAX_SECONDS):
        raise errors.invalid_argument(f"{name} must be seconds from 0 to {MAX_SECONDS:g}")
    return float(value)


def announce(
    now: float, notice: Any, duration: Any, kind: str = "SCHEDULED", worker: int | None = None
) -> dict[str, Any]:
    """A new maintenance starting `notice` seconds from `now`, lasting `duration` (the
    VM's guest shut down in the first min(SOFT_OFF, half of it)). A SCHEDULED one may be
    started early (`performMaintenance`), and its latest start is its announced start."""
    if kind not in TYPES:
        raise errors.invalid_argument(f"type must be one of {list(TYPES)}")
    start = now + _seconds("notice", notice, 0.0)
    length = _seconds("duration", duration, DEFAULT_DURATION)
    return {
        "type": kind,
        "can_reschedule": kind == "SCHEDULED",
        "start": start,
        "latest": start,
        "end": start + length,
        "soft_off": min(SOFT_OFF, length / 2),
        "phase": "PENDING",
        "worker": worker,
    }


def begin_now(record: dict[str, Any], now: float) -> None:
    """Move the window to start now, keeping its length (performMaintenance, advance)."""
    length = record["end"] - record["start"]
    record["start"], record["end"] = now, now + length


def due_phase(record: dict[str, Any], now: float) -> str:
    """The phase the clock says: PENDING, SHUTDOWN, DOWN, or OVER."""
    if now < record["start"]:
        return "PENDING"
    if now < record["start"] + record["soft_off"]:
        return "SHUTDOWN"
    return "DOWN" if now < record["end"] else "OVER"


def step(record: dict[str, Any], now: float) -> None:
    """Control plane's advance: the next phase begins now."""
    phase = record["phase"]
    if phase == "PENDING":
        begin_now(record, now)
    elif phase == "SHUTDOWN":
        record["soft_off"] = now - record["start"]
    else:
        record["end"] = now


def tick(holders: Iterable[Any], apply: Callable[[Any, float], None], now: float) -> None:
    """Bring every node or VM with a maintenance to its phase (`apply(holder, now)`)."""
    for holder in list(holders):
        if holder.maintenance is not None:
            apply(holder, now)


def advance(holder: Any, apply: Callable[[Any, float], None], now: float) -> bool:
    """Control plane: the next phase of the holder's maintenance begins now."""
    if holder.maintenance is None:
        return False
    step(holder.maintenance, now)
    apply(holder, now)
    return True


def status(record: dict[str, Any]) -> str:
    return "PENDING" if record["phase"] == "PENDING" else "ONGOING"


def render(record: dict[str, Any] | None) -> dict[str, Any] | None:
    """`upcomingMaintenance` as both REST APIs write it (timestamps RFC 3339)."""
    if record is None:
        return None
    return {
        "type": record["type"],
        "canReschedule": bool(record["can_reschedule"]) and record["phase"] == "PENDING",
        "windowStartTime": proto_timestamp(record["start"]),
        "windowEndTime": proto_timestamp(record["end"]),
        "latestWindowStartTime": proto_timestamp(record["latest"]),
        "maintenanceStatus": status(record),
    }


def guest_view(record: dict[str, Any] | None) -> dict[str, str]:
    """`instance/upcoming-maintenance` of the metadata server: every value a string."""
    shown = render(record)
    if shown is None:
        return {}
    return {
        "can_reschedule": "true" if shown["canReschedule"] else "false",
        "latest_window_start_time": shown["latestWindowStartTime"],
        "maintenance_status": shown["maintenanceStatus"],
        "type": shown["type"],
        "window_end_time": shown["windowEndTime"],
        "window_start_time": shown["windowStartTime"],
    }


def event(record: dict[str, Any] | None, migrate: bool = False) -> str:
    """`instance/maintenance-event`: NONE, and while the window is ongoing what the host
    does with the VM (TERMINATE for every TPU VM)."""
    if record is None or record["phase"] == "PENDING":
        return "NONE"
    return MIGRATE_EVENT if migrate else TERMINATE_EVENT
