"""The emulator's core names no service: a service registers what it adds (routes,
ticks, its slots of the state) in its `service.py`, and the core reads them from the
list `tpuctl.emulator.services`. The import graph is tests/test_architecture.py's."""

from __future__ import annotations

from tests.test_architecture import GRAPH, _in


def emulator_core_imports_a_service(src: str, dst: str) -> bool:
    """the emulator's core naming a service package: a service registers what it adds
    (routes, ticks, its slots of the state) in its `service.py`, which the core reads
    from the list `tpuctl.emulator.services`, the only module above it that it imports."""
    own = _in(dst, "tpuctl.emulator.core") or dst in ("tpuctl.emulator", "tpuctl.emulator.services")
    return _in(src, "tpuctl.emulator.core") and _in(dst, "tpuctl.emulator") and not own


def test_the_emulators_core_imports_no_service() -> None:
    found = {
        (src.removeprefix("tpuctl.emulator."), dst.removeprefix("tpuctl.emulator."))
        for src in GRAPH
        for dst in GRAPH[src]
        if emulator_core_imports_a_service(src, dst)
    }
    assert found == set(), "the core names a service: let the service register it"


def test_the_core_rule_sees_a_service_import() -> None:
    src = "tpuctl.emulator.core.state"
    assert emulator_core_imports_a_service(src, "tpuctl.emulator.billing.catalog")
    assert not emulator_core_imports_a_service(src, "tpuctl.emulator.core.slots")
    assert not emulator_core_imports_a_service(src, "tpuctl.emulator.services")
    assert not emulator_core_imports_a_service("tpuctl.emulator.billing.service", src)
