"""The emulator's services are registered in one list (emulator/services.py): every
service package is in it, the core serves their routes in its order, and runs their
transitions, a new one's included, with no change to the core."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import tpuctl.emulator
from tpuctl.emulator import services
from tpuctl.emulator.core import urls
from tpuctl.emulator.core.service import Service
from tpuctl.emulator.core.slots import Slot
from tpuctl.emulator.core.state import State
from tpuctl.emulator.services import Backend

PACKAGE = Path(tpuctl.emulator.__file__).parent


def test_every_package_with_routes_is_a_registered_service() -> None:
    with_routes = {p.parent.name for p in PACKAGE.glob("*/urls.py")} - {"core", "control"}
    registered = {
        name
        for name in with_routes
        if (PACKAGE / name / "service.py").exists()
        and importlib.import_module(f"tpuctl.emulator.{name}.service").SERVICE in services.SERVICES
    }
    assert registered == with_routes
    listed = [s.routes for s in services.SERVICES]
    assert all(s.routes or s.slots for s in services.SERVICES), "a service that does nothing"
    assert [r for routes in listed for r in routes] == urls.api_routes(services.SERVICES)


def test_a_registered_services_transitions_run_with_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[tuple[str, float]] = []

    def tick(state: State, now: float) -> None:
        seen.append(("new", now))

    new = Service("new.googleapis.com", (), (tick,))
    monkeypatch.setattr(services, "SERVICES", (*services.SERVICES, new))
    now = [1000.0]
    backend = Backend(clock=lambda: now[0])
    try:
        backend.tick()
        now[0] = 1005.0
        backend.list_nodes("p", "us-central1-a")  # every API call applies what is due first
    finally:
        backend.close()
    assert seen == [("new", 1000.0), ("new", 1005.0)]


def test_a_registered_services_slot_is_held_configured_and_kept_over_a_restart(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A new service's slot is made with the state, shown and changed through the
    control plane's config, written to the state file and read back, and made anew by a
    reset: no change to the core."""

    def update(state: State, body: dict) -> None:
        state.widgets["colour"] = body.get("widget_colour", state.widgets["colour"])

    def validate(body: dict) -> None:
        if body.get("widget_colour", "red") not in ("red", "blue"):
            raise ValueError("widget_colour")

    slot = Slot(
        "widgets",
        lambda: {"colour": "red"},
        frozenset({"widget_colour"}),
        config=lambda state: {"widget_colour": state.widgets["colour"]},
        validate=validate,
        update=update,
        save=lambda state: {"made": 3},
        load=lambda state, config, kept: state.widgets.update(
            colour=config["widget_colour"], made=kept["made"]
        ),
    )
    new = Service("widgets.googleapis.com", slots=(slot,))
    monkeypatch.setattr(services, "SERVICES", (*services.SERVICES, new))
    backend = Backend(state_dir=tmp_path)
    try:
        assert backend.config()["widget_colour"] == "red"
        with pytest.raises(ValueError):
            backend.update_config({"widget_colour": "green"})
        assert backend.update_config({"widget_colour": "blue"})["widget_colour"] == "blue"
    finally:
        backend.close()
    again = Backend(state_dir=tmp_path)
    try:
        assert again.state.widgets == {"colour": "blue", "made": 3}
        again.reset()
        assert again.state.widgets == {"colour": "red"}
    finally:
        again.close()


def test_a_slot_kept_over_a_reset_outlives_it() -> None:
    # the TPU API's address allocator: an address is never handed out twice
    state = State(slots=services.slots())
    state.allocator.allocate(2)
    state.nodes["n"] = object()
    handed_out = state.allocator.next_index
    state.clear()
    assert state.allocator.next_index == handed_out and state.nodes == {}
