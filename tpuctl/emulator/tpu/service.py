"""The Cloud TPU API (tpu.googleapis.com): nodes and their transitions, queued resources."""

from __future__ import annotations

from tpuctl.emulator.core.service import Service
from tpuctl.emulator.core.state import State
from tpuctl.emulator.tpu import maintenance, queued, urls

SERVICE = Service(
    "tpu.googleapis.com",
    tuple(urls.ROUTES),
    (State.tick_nodes, queued.tick, maintenance.tick),
)
