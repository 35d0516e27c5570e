"""A service's part of the emulator's state (`state.State`), as the service registers
it in its `service.py` (`service.Service.slots`). The hooks are given the whole state
(typed Any here: the state holds the slots, so this module cannot name it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def _no_config(state: Any) -> dict[str, Any]:
    return {}


def _no_check(body: dict[str, Any]) -> None:
    pass


def _no_update(state: Any, body: dict[str, Any]) -> None:
    pass


@dataclass(frozen=True)
class Slot:
    """A service's part of the state: `State.<name>`, made anew by `new()` at every
    start and reset. Its hooks, each given the whole state: `config` (what the control
    plane shows of it and the state file keeps, under `config_keys`), `validate` (a
    control-plane config body, before any slot applies it; raises INVALID_ARGUMENT) and
    `update` (apply the body); `save` (what of it the state file keeps under `file_key`,
    JSON; None: nothing) and `load` (from the file's config and that value). `reset`:
    made anew at a reset too (False: kept, as the addresses handed out are)."""

    name: str
    new: Callable[[], Any]
    config_keys: frozenset[str] = frozenset()
    config: Callable[[Any], dict[str, Any]] = _no_config
    validate: Callable[[dict[str, Any]], None] = _no_check
    update: Callable[[Any, dict[str, Any]], None] = _no_update
    file_key: str = ""
    save: Callable[[Any], Any] | None = None
    load: Callable[[Any, dict[str, Any], Any], None] | None = None
    reset: bool = True


def configured(name: str, new: Callable[[], Any], config_keys: Any, **hooks: Any) -> Slot:
    """A slot whose object shows and takes its own config: `to_config()`, `update(body)`
    (the other hooks as `Slot`'s)."""
    return Slot(
        name,
        new,
        frozenset(config_keys),
        config=lambda state: getattr(state, name).to_config(),
        update=lambda state, body: getattr(state, name).update(body),
        **hooks,
    )
