"""docs/emulator-reference.md is what scripts/emulator_reference.py makes from the
emulator's tables now: a route, control call, config key or rule added without running
`make docs-reference` fails here."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "emulator_reference.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("emulator_reference", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_page_is_what_the_script_makes_now() -> None:
    script = _script()
    assert script.PAGE.read_text() == script.render(), "run: make docs-reference"


def test_the_page_names_every_route_control_call_and_config_key() -> None:
    from tpuctl.emulator.control.urls import CONTROL_ROUTES
    from tpuctl.emulator.services import SERVICES

    script = _script()
    page = script.PAGE.read_text()
    for service in SERVICES:
        assert f"### {service.name}" in page
        for _, path, _, _, _ in service.routes:
            assert f"`{script.template(path)}`".replace("|", "\\|") in page, path
    for _, path in CONTROL_ROUTES:
        assert f"`/_emulator/v1/{path}`" in page, path
    assert "`billing_catalog`" in page and "`stale-lockfile`" in page
    assert len(page.encode()) <= 25_000


def test_paths_read_as_templates() -> None:
    template = _script().template
    assert (
        template(r"/v2/projects/(?P<project>[^/]+)/locations/(?P<zone>[^/:]+)/nodes")
        == "/v2/projects/{project}/locations/{zone}/nodes"
    )
    assert template(r"/v[12]/projects/(?P<p>[^/]+)") == "/v{1|2}/projects/{p}"
    assert template(r"/compute/(?:v1|beta|alpha)/x") == "/compute/{v1|beta|alpha}/x"
    assert template(r"/v1/(?P<op>operations/[^/]+)") == "/v1/{op}"


def test_check_exits_1_when_the_page_differs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ok = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    script = _script()
    script.PAGE = tmp_path / "stale.md"
    script.PAGE.write_text("# stale\n")
    monkeypatch.setattr(sys, "argv", ["emulator_reference.py", "--check"])
    assert script.main() == 1
    assert script.PAGE.read_text() == "# stale\n"
