"""What an emulated Google API is to the emulator's core: its name, its REST routes
(`<service>/urls.py`), the transitions it applies as the clock passes and its slots of
the state (what it holds, its config keys, what of it outlives a restart). Each service
package says so in its `service.py`; `emulator/services.py` lists them, and the core
(`urls.py`, `backend.py`, `state.py`, `persistence.py`) reads that list, never a service
by name."""

from __future__ import annotations

import json
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
class Request:
    """One HTTP request as a `Prefix` reads it: the body is read only when asked for."""

    method: str
    path: str
    query: dict[str, str]
    headers: Any  # the request's headers (an email.message.Message: `.get(name)`)
    raw: Callable[[], bytes]  # its body's bytes
    body: Callable[[], dict[str, Any]]  # its body as a JSON object (ApiError if it is none)


# (HTTP status, headers but Content-Length, which the server adds last, bytes)
Answer = tuple[int, list[tuple[str, str]], bytes]


def json_answer(status: int, payload: Any, end: bytes = b"") -> Answer:
    """`payload` in JSON, as every REST answer of the emulator is sent."""
    data = json.dumps(payload).encode() + end
    return status, [("Content-Type", "application/json; charset=UTF-8")], data


@dataclass(frozen=True)
class Prefix:
    """Requests whose path starts with `path` that a service answers whole, instead of
    the REST routes (the HTTP front, `http_front.py`; the longest path that matches
    wins): `respond(backend, request)` answers an `Answer`, or raises `ApiError`, which
    goes out in Google's error shape."""

    path: str
    respond: Callable[[Any, Request], Answer]


# A REST answer's rewrite, `(method, path, query, result) -> result`, before it is sent
Rewrite = Callable[[str, str, dict[str, str], Any], Any]


@dataclass(frozen=True)
class Service:
    """One emulated API. `ticks` run in order, under the backend's lock, before every
    call and between calls (`Backend.tick`): each completes what is due as of `now`.
    `slots`: what it holds of the state (`Slot`); `fronts`: its own ports (`Front`);
    `prefixes`: the paths it answers whole (`Prefix`); `rewrites`: what it changes of
    every REST answer on the way out, in order (`Rewrite`)."""

    name: str
    routes: tuple[Route, ...] = ()
    ticks: tuple[Tick, ...] = ()
    slots: tuple[Slot, ...] = ()
    fronts: tuple[Front, ...] = ()
    prefixes: tuple[Prefix, ...] = ()
    rewrites: tuple[Rewrite, ...] = ()
