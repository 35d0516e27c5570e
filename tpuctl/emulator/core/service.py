"""What an emulated Google API is to the emulator's core: its name, its REST routes
(`<service>/urls.py`), the transitions it applies as the clock passes and its slots of
the state (what it holds, its config keys, what of it outlives a restart). Each service
package says so in its `service.py`; `emulator/services.py` lists them, and the core
(`urls.py`, `backend.py`, `state.py`, `persistence.py`) reads that list, never a service
by name."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from tpuctl.emulator.core.routes import Route
from tpuctl.emulator.core.slots import Slot

if TYPE_CHECKING:
    from tpuctl.emulator.core.state import State

Tick = Callable[["State", float], None]


class Facade(Protocol):
    """What a service's front reads of the backend (`services.Backend`, which composes
    the services' calls): the lock over the state, the state, its change notices, where the HTTP
    server listens, and `apply` (an API function run under the lock). A front's other
    calls name backend methods (`routes.OnFront`)."""

    lock: Any  # a threading.RLock
    changes: threading.Condition
    state: State
    endpoint: str

    def apply(self, fn: Callable[..., Any], *args: Any) -> Any: ...


@dataclass(frozen=True)
class Front:
    """A port of a service's own beside the emulator's REST port (the server starts it,
    `core/server.py`): `start(backend, host, port, state_dir, verbose)` (port 0: the one
    it had before where free, else a free one; the state dir None: none) answers a
    started object with `port`, `address` (host:port) and `stop()`, or None where it
    serves nothing (what it stands in front of is off). The backend holds it as
    `backend.fronts.<name>` (control routes and later fronts may name it).

    `phase`: "under" starts before the HTTP server serves and stops after it stopped
    (what requests reach through it), "beside" starts before it serves and stops before
    it stops, "after" starts once it serves and stops first. `shown`: the status shows
    `address` as `<name>_endpoint` (else its start tells the backend where it is).
    `remember`: the port the ports file keeps for it (None: `port`)."""

    name: str
    start: Callable[..., Any]
    phase: str = "beside"
    shown: bool = True
    remember: Callable[[Any], int | None] | None = None


@dataclass(frozen=True)
class Service:
    """One emulated API. `ticks` run in order, under the backend's lock, before every
    call and between calls (`Backend.tick`): each completes what is due as of `now`.
    `slots`: what it holds of the state (`Slot`); `fronts`: its own ports (`Front`)."""

    name: str
    routes: tuple[Route, ...] = ()
    ticks: tuple[Tick, ...] = ()
    slots: tuple[Slot, ...] = ()
    fronts: tuple[Front, ...] = ()
