"""Compute Engine (compute.googleapis.com): TPU VM instances, their scheduling
(preemption, maxRunDuration), and the managed instance groups of slices."""

from __future__ import annotations

from tpuctl.emulator.compute import api, group_api, maintenance, scheduling, urls
from tpuctl.emulator.core.service import Service

SERVICE = Service(
    "compute.googleapis.com",
    tuple(urls.ROUTES),
    (api.tick, scheduling.tick, group_api.tick, maintenance.tick),
)
