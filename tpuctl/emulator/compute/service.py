"""Compute Engine (compute.googleapis.com): TPU VM instances, their scheduling
(preemption, maxRunDuration), and the managed instance groups of slices."""

from __future__ import annotations

from tpuctl.emulator.compute import group_api, maintenance, scheduling, transitions, urls
from tpuctl.emulator.compute.models import ComputeState
from tpuctl.emulator.core.service import Service
from tpuctl.emulator.core.slots import Slot

# `state.compute`: Compute Engine's TPU VM instances, groups, templates, policies and
# operations (models.py), all kept over a restart
INSTANCES = Slot(
    "compute",
    ComputeState,
    save=lambda state: state.compute.to_state(),
    load=lambda state, config, kept: state.compute.load(kept or {}),
)

SERVICE = Service(
    "compute.googleapis.com",
    tuple(urls.ROUTES),
    (transitions.tick, scheduling.tick, group_api.tick, maintenance.tick),
    slots=(INSTANCES,),
)
