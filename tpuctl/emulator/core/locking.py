"""The backend's lock discipline, shared by every service's calls (backend.py, `*/calls.py`):
a public method marked `@locked` runs under the lock after the transitions that are due,
and, if it changed anything, tells the listeners and writes the state."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

F = TypeVar("F", bound=Callable[..., Any])


def locked(fn: F) -> F:
    """Run under the lock, after applying due transitions; save if anything changed."""

    @functools.wraps(fn)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            self._tick()
            try:
                return fn(self, *args, **kwargs)
            finally:
                if self.state.dirty:
                    for listener in self.listeners:
                        listener()  # e.g. the SSH workers follow the new state
                    self.changes.notify_all()  # e.g. metadata `?wait_for_change=true`
                if self.state.dirty:
                    self._save()

    return cast(F, wrapper)
