"""What an emulated Google API is to the emulator's core: its name, its REST routes
(`<service>/urls.py`) and the transitions it applies as the clock passes. Each service
package says so in its `service.py`; `emulator/services.py` lists them, and the core
(`urls.py`, `backend.py`) reads that list, never a service by name."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from tpuctl.emulator.core.routes import Route

if TYPE_CHECKING:
    from tpuctl.emulator.core.state import State

Tick = Callable[["State", float], None]


class Facade(Protocol):
    """What a service's front reads of the backend (`core/backend.py`), which imports the
    services: the lock over the state, the state, its change notices, where the HTTP
    server listens, and `apply` (an API function run under the lock). A front's other
    calls name backend methods (`routes.OnFront`)."""

    lock: Any  # a threading.RLock
    changes: threading.Condition
    state: State
    endpoint: str

    def apply(self, fn: Callable[..., Any], *args: Any) -> Any: ...


@dataclass(frozen=True)
class Service:
    """One emulated API. `ticks` run in order, under the backend's lock, before every
    call and between calls (`Backend.tick`): each completes what is due as of `now`."""

    name: str
    routes: tuple[Route, ...] = ()
    ticks: tuple[Tick, ...] = ()
