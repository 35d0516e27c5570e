"""The state on disk: `STATE_DIR/state.json`, written whole and atomically.

Invariants: a reader never sees a half-written file (write to a temporary file, then
`os.replace`); the file holds what outlives a restart (the config, and what the
services' slots keep: nodes, operations, queued resources, the allocator's place,
Compute Engine instances and operations, the tokens minted for the VMs...) and nothing
else: faults and request counts start afresh, as after a reset.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tpuctl.emulator.core.state import State

STATE_FILE = "state.json"
VERSION = 1


def save(state: State, state_dir: Path | None) -> None:
    """Write `state` under `state_dir` (None: kept in memory only); it is clean after."""
    state.dirty = False
    if state_dir is None:
        return
    data: dict[str, Any] = {"version": VERSION, "config": state.config()}
    for slot in state.slots.values():  # what each service keeps (core/service.py's Slot)
        if slot.save is not None:
            data[slot.file_key or slot.name] = slot.save(state)
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / STATE_FILE
    tmp = path.with_name(f".{STATE_FILE}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


def load(state: State, state_dir: Path | None) -> None:
    """Fill `state` from the file under `state_dir`, if there is one; raises OSError,
    ValueError, TypeError or KeyError on a file it cannot read."""
    path = state_dir / STATE_FILE if state_dir else None
    if path is None or not path.exists():
        return
    data = json.loads(path.read_text())
    config = data.get("config", {})
    state.durations.update(config.get("durations", {}))
    state.defaults.update(config.get("defaults", {}))
    for slot in state.slots.values():
        if slot.load is not None:
            slot.load(state, config, data.get(slot.file_key or slot.name))
