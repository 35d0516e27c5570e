"""Everything the emulated cloud holds: the config (durations, defaults, faults), the
clock, and each service's part, a slot it registers (`service.Slot`), read as
`state.<slot name>` (the TPU API's nodes and their transitions: `tpu/nodes.py`).

Invariants:
- No lock here: the backend (`core/backend.py`) holds one around every call into this
  state and into the modules that work on it.
- `dirty` is True whenever something changed since the state was last written; whoever
  changes the state sets it (`changed()`), `persistence.save` clears it.
- A slot made with `reset=False` outlives `clear()` (the address allocator: an address
  is never handed out twice); this module names no service's slot.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from typing import Any

from tpuctl.emulator.core import errors
from tpuctl.emulator.core.errors import Faults
from tpuctl.emulator.core.slots import Slot

DEFAULT_DURATIONS: dict[str, float | None] = {
    "create": 1.0,
    "stop": 0.5,
    "start": 0.5,
    "delete": 0.5,
    # queued resources: CREATING -> ACCEPTED, then ACCEPTED -> a try to provision
    "queued_accept": 0.5,
    "queued_schedule": 0.5,
    # how long after a node first becomes READY its guest publishes the SSH host keys
    # (guest attributes `hostkeys/`), as a booting TPU VM's guest agent does
    "hostkeys": 1.0,
    # Service Usage: an enable's operation (quotas/service_usage.py)
    "enable_service": 0.5,
    # A preempted spot or preemptible node's notice: its guest sees `instance/preempted`
    # TRUE and every process gets SIGTERM, then the node is PREEMPTED. About 30 s on
    # Compute Engine (contributing/emulator-fidelity.md cites it); a preemption may set its own.
    "preempt_notice": 30.0,
}
DEFAULT_PROJECT = "tpuctl-demo"
DEFAULT_ZONE = "us-central1-a"
OWN_CONFIG_KEYS = frozenset({"durations", "defaults"})  # the others: the slots'


class State:
    """The config (durations, defaults, faults), the clock, and the services' slots
    (`slots`: what `service.Slot` each service registers, `emulator/services.py` lists)
    of every project and zone."""

    def __init__(self, clock: Callable[[], float] = time.time, slots: Iterable[Slot] = ()) -> None:
        self.clock = clock
        self.slots: dict[str, Slot] = {}
        for slot in slots:
            if slot.name in self.slots:
                raise ValueError(f"two slots named {slot.name}")
            self.slots[slot.name] = slot
        self.clear()
        if clash := set(self.slots) & set(vars(self)):
            raise ValueError(f"slots named as the state's own: {sorted(clash)}")

    def __getattr__(self, name: str) -> Any:
        """A service's slot (called only for names the state itself does not hold)."""
        try:
            return self.__dict__["held"][name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self.__dict__.get("slots", ()):
            self.held[name] = value  # a slot made anew (e.g. loaded)
        else:
            object.__setattr__(self, name, value)

    def clear(self) -> None:
        """Back to a fresh emulator (the slots made with `reset=False` carry on)."""
        kept = self.__dict__.get("held", {})
        self.durations: dict[str, float | None] = dict(DEFAULT_DURATIONS)
        self.defaults = {"project": DEFAULT_PROJECT, "zone": DEFAULT_ZONE}
        self.faults = Faults()
        self.held: dict[str, Any] = {
            name: kept[name] if name in kept and not slot.reset else slot.new()
            for name, slot in self.slots.items()
        }
        self.rng = random.Random()
        self.dirty = True

    def now(self) -> float:
        return self.clock()

    def changed(self) -> None:
        """Something changed: it is written out (and the listeners told) after the call."""
        self.dirty = True

    def config(self) -> dict[str, Any]:
        """The config as the control plane shows it and as the state file keeps it."""
        config: dict[str, Any] = {
            "durations": dict(self.durations),
            "defaults": dict(self.defaults),
        }
        for slot in self.slots.values():
            config.update(slot.config(self))
        return config

    def update_config(self, body: dict[str, Any]) -> dict[str, Any]:
        """Change durations, defaults and the slots' settings, all checked before any
        applies (control plane: `POST config`); the config as it is then."""
        known = OWN_CONFIG_KEYS.union(*(slot.config_keys for slot in self.slots.values()))
        unknown = set(body) - known
        if unknown:
            raise errors.invalid_argument(f"unknown config keys: {sorted(unknown)}")
        durations = body.get("durations") or {}
        for verb, seconds in durations.items():
            if verb not in DEFAULT_DURATIONS:
                raise errors.invalid_argument(f"unknown duration '{verb}'")
            number = isinstance(seconds, (int, float)) and not isinstance(seconds, bool)
            if (seconds is not None or verb == "hostkeys") and not (number and seconds >= 0):
                held = "" if verb == "hostkeys" else " or null"
                raise errors.invalid_argument(f"duration '{verb}' must be seconds >= 0{held}")
        defaults = body.get("defaults") or {}
        for key, value in defaults.items():
            if key not in ("project", "zone") or not isinstance(value, str) or not value:
                raise errors.invalid_argument(f"bad default {key}={value!r}")
        for slot in self.slots.values():
            slot.validate(body)
        for slot in self.slots.values():
            slot.update(self, body)
        self.durations.update({k: None if v is None else float(v) for k, v in durations.items()})
        self.defaults.update(defaults)
        self.changed()
        return self.config()
