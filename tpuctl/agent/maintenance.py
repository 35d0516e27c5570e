"""A host maintenance seen from the VM, and told to the job as a preemption's notice is.

A TPU VM cannot live-migrate, so a host maintenance stops it ("Manage maintenance
events", https://cloud.google.com/tpu/docs/maintenance-events). At the window's start the
metadata server's `instance/maintenance-event` turns `TERMINATE_ON_HOST_MAINTENANCE`
(`NONE` otherwise; `MIGRATE_ON_HOST_MAINTENANCE` for a VM that migrates and runs on:
"Monitor and plan for a host maintenance event",
https://cloud.google.com/compute/docs/instances/monitor-plan-host-maintenance-event) and
the guest is shut down (SIGTERM to every process). The agent watches the key as it
watches `instance/preempted` (with `wait_for_change`) and gives the job the same notice:
SIGTERM, at most --notice-budget seconds to save its state into TPUCTL_OUTPUT_DIR, the
outputs synced a last time; its status says PREEMPTED with `"reason": "maintenance"`,
and the node is left to the runner, which waits for it to come back.
"""

from __future__ import annotations

import threading
from typing import Any

from .metadata import METADATA_URL
from .net import HttpError, http

REASON = "maintenance"  # the status's `reason` (a preemption's: "preemption")
TERMINATE = "TERMINATE_ON_HOST_MAINTENANCE"


def event(wait_etag: str | None = None) -> tuple[str, str]:
    """(`instance/maintenance-event`, its ETag)."""
    return instance_value("maintenance-event", wait_etag)


def instance_value(key: str, wait_etag: str | None = None) -> tuple[str, str]:
    """(the metadata server's `instance/KEY`, upper case, its ETag); with `wait_etag`,
    held until the value differs from that ETag (or a minute passes), as Google's guest
    agents watch `instance/preempted` and `instance/maintenance-event`."""
    url = f"{METADATA_URL}/instance/{key}"
    if wait_etag is not None:
        url += f"?wait_for_change=true&timeout_sec=60&last_etag={wait_etag}"
    _, head, body = http("GET", url, headers={"Metadata-Flavor": "Google"}, attempts=2, timeout=75)
    return body.decode().strip().upper(), head.get("etag", "")


def stops(value: str) -> bool:
    """Does the event stop this VM (not a live migration, not NONE)?"""
    return value.startswith("TERMINATE")


def watch(job: Any, stop: threading.Event) -> None:
    """A thread: the job's notice as soon as the metadata server says the VM stops."""
    etag = "NONE"
    while not stop.is_set():
        try:
            value, etag = event(etag)
        except HttpError:  # not served here, or a hiccup: look again later
            if stop.wait(10):
                return
            continue
        if stops(value):
            job.notice(f"instance/maintenance-event is {value}", reason=REASON)
            return


def now() -> bool:
    """After a shutdown signal: is the VM stopping for a host maintenance?"""
    return stops(event()[0])
