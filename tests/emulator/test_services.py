"""The emulator's services are registered in one list (emulator/services.py): every
service package is in it, the core serves their routes in its order, and runs their
transitions, a new one's included, with no change to the core."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import tpuctl.emulator
from tpuctl.emulator import services
from tpuctl.emulator.core import backend as backend_module
from tpuctl.emulator.core import urls
from tpuctl.emulator.core.backend import Backend
from tpuctl.emulator.core.service import Service
from tpuctl.emulator.core.state import State

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
    assert all(listed), "a registered service serves no route"
    assert [r for routes in listed for r in routes] == urls.API_ROUTES


def test_a_registered_services_transitions_run_with_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[tuple[str, float]] = []

    def tick(state: State, now: float) -> None:
        seen.append(("new", now))

    new = Service("new.googleapis.com", (), (tick,))
    monkeypatch.setattr(backend_module, "SERVICES", (*services.SERVICES, new))
    now = [1000.0]
    backend = Backend(clock=lambda: now[0])
    try:
        backend.tick()
        now[0] = 1005.0
        backend.list_nodes("p", "us-central1-a")  # every API call applies what is due first
    finally:
        backend.close()
    assert seen == [("new", 1000.0), ("new", 1005.0)]
