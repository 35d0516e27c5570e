"""The emulated cloud as the server, the SSH workers and the tests see it: one lock over
the state (`state.State`) and the calls that work on it. This module holds what every
service's calls share (the lock, the state, its listeners, the gate before a call); each
service adds its own calls as a mixin of this class in its `calls.py`, and
`emulator/services.py` composes them into the `Backend` the server serves.

Invariants:
- Every public method takes the lock; those marked `@locked` (locking.py) also apply the
  transitions that are due first, and after the call, if anything changed, tell the listeners (which
  may change nodes in turn) and write the state (`persistence`).
- Listeners run under the lock: they read the state through calls that never apply
  transitions, so a listener cannot change the state under the feet of the call that
  triggered it.
- The API methods answer model objects, which each service's front renders as its wire
  format under the lock; errors are `errors.ApiError`s.
"""

from __future__ import annotations

import threading
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tpuctl.emulator.core import persistence, urls
from tpuctl.emulator.core.locking import locked
from tpuctl.emulator.core.requests import RequestLog
from tpuctl.emulator.core.service import Service
from tpuctl.emulator.core.state import State


class BackendCore:
    """The lock, the state and what every service's calls share (`services.Backend`
    composes them)."""

    def __init__(
        self,
        services: tuple[Service, ...],
        state_dir: Path | str | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.services = services  # in order: their ticks run so
        self.routes = urls.Routes(services)  # their REST routes (`api_call`)
        self.lock = threading.RLock()
        # Notified (under the lock) after every change of the state.
        self.changes = threading.Condition(self.lock)
        self._state_dir = Path(state_dir) if state_dir else None
        self.state = State(clock, [slot for service in services for slot in service.slots])
        # Called under the lock after every change (they may change nodes in turn).
        self.listeners: list[Callable[[], None]] = []
        self.endpoint = ""  # host:port of the HTTP server, set once it listens
        # the services' own ports (service.Front) by name, and their addresses
        self.fronts = types.SimpleNamespace()
        self.front_endpoints: dict[str, str] = {}
        self.requests = RequestLog()  # counts and bodies of the API calls, for the control plane

    def _load(self) -> None:
        persistence.load(self.state, self._state_dir)

    def _save(self) -> None:
        persistence.save(self.state, self._state_dir)

    def _tick(self) -> None:
        now = self.state.now()
        for service in self.services:
            for tick in service.ticks:
                tick(self.state, now)

    @locked
    def tick(self) -> None:
        """Apply the transitions that are due, and tell the listeners (the SSH workers, the
        startup scripts): the server's ticker calls it between requests."""

    def follow(self, listener: Callable[[], None]) -> None:
        """Call `listener` now and after every change, under the lock; save what it did."""
        with self.lock:
            self.listeners.append(listener)
            listener()
            self._save()

    def unfollow(self, listener: Callable[[], None]) -> None:
        with self.lock:
            if listener in self.listeners:
                self.listeners.remove(listener)

    # -- the APIs written as functions over the state (quotas/service_usage.py, ...) --
    @locked
    def apply(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run an API function `fn(state, *args)` under the lock (routes of `routes.OnState`)."""
        return fn(self.state, *args)

    @locked
    def admit(
        self, verb: str, project: str, path: str, principal: Any = None, write: bool = True
    ) -> None:
        """The gate before every API call (iam/access.py): refuse it as the cloud's front end
        would, for a token without the scope, an API off, no billing or a missing
        permission (the caller's, or the VM's service account's: `principal`)."""
        with self.lock:
            self.state.access.check(
                verb, project, path, self.state.quota.api, principal=principal, write=write
            )

    def principal(self, authorization: str | None) -> Any:
        """The VM's service account behind a bearer token (iam.Principal), or None."""
        with self.lock:
            return self.state.access.accounts.principal(authorization)

    def draw_fault(self, target: str) -> tuple[float, int | None, bool, bool]:
        raise NotImplementedError  # the control plane's (control/calls.py)

    def node_env(self, node: Any, worker: int) -> dict[str, str]:
        raise NotImplementedError  # the workers' (workers/calls.py)

    def close(self) -> None:
        """Release what the backend holds outside its state (each service's calls add
        theirs)."""
