"""Compute Engine (compute.googleapis.com): TPU VM instances, their scheduling
(preemption, maxRunDuration), and the managed instance groups of slices."""

from __future__ import annotations

from typing import Any

from tpuctl.emulator.compute import batch, group_api, maintenance, scheduling, transitions, urls
from tpuctl.emulator.compute.models import ComputeState
from tpuctl.emulator.core.service import Answer, Prefix, Request, Service
from tpuctl.emulator.core.slots import Slot

# `state.compute`: Compute Engine's TPU VM instances, groups, templates, policies and
# operations (models.py), all kept over a restart
INSTANCES = Slot(
    "compute",
    ComputeState,
    save=lambda state: state.compute.to_state(),
    load=lambda state, config, kept: state.compute.load(kept or {}),
)


def _batch(backend: Any, request: Request) -> Answer:
    """Compute's batch: gcloud's many calls at once (batch.py)."""
    content_type, data = batch.respond(
        backend,
        request.headers.get("Content-Type", ""),
        request.raw(),
        request.headers.get("Authorization"),
    )
    return 200, [("Content-Type", content_type)], data


SERVICE = Service(
    "compute.googleapis.com",
    tuple(urls.ROUTES),
    (transitions.tick, scheduling.tick, group_api.tick, maintenance.tick),
    slots=(INSTANCES,),
    prefixes=(Prefix(batch.PREFIX, _batch),),
)
