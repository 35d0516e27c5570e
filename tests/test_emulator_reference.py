"""docs/emulator-reference.md is what scripts/emulator_reference.py makes from the
emulator's tables now: a route, control call, config key or rule added without running
`make docs-reference` fails here."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests import script_modules

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "emulator_reference.py"


def _script() -> ModuleType:
    return script_modules.load("scripts/emulator_reference.py")


def test_the_reference_page_is_what_the_script_makes_now() -> None:
    script = _script()
    assert script.PAGE.read_text() == script.render(), "run: make docs-reference"


def routes_on_page(page: str) -> set[tuple[str, str, str, str]]:
    """(service, method, path, verb) of each REST route the page names: its lines under
    their prefixes, and the routes a first segment serves again (`/v2alpha1` serves each
    route below under `/v2` too) spelled out."""
    section = page[page.index("## REST routes") : page.index("## Control-plane routes")]
    named: set[tuple[str, str, str, str]] = set()
    aliases: list[tuple[str, str, list[str]]] = []
    service = prefix = ""
    for line in section.splitlines():
        if line.startswith("### "):
            service, prefix = line[4:], ""
        elif m := re.fullmatch(
            r"`/(\S+)` serves each route below under (.+) too, as they do\.", line
        ):
            aliases.append((service, m.group(1), re.findall(r"`/([^`]+)`", m.group(2))))
        elif m := re.fullmatch(r"`(/[^`]*)`", line):
            prefix = m.group(1)
        elif m := re.match(r"- ([A-Z]+) `([^`]+)` `([^`]+)`", line):
            named.add((service, m.group(1), prefix + m.group(2), m.group(3)))
        elif not line:
            prefix = ""
    for service, alias, froms in aliases:
        named |= {
            (s, method, f"/{alias}/" + path.split("/", 2)[2], verb)
            for s, method, path, verb in list(named)
            if s == service and path.split("/")[1] in froms
        }
    return named


def test_the_page_names_every_route_control_call_and_config_key() -> None:
    from tpuctl.emulator.control.urls import CONTROL_ROUTES
    from tpuctl.emulator.services import SERVICES

    script = _script()
    page = script.PAGE.read_text()
    named = routes_on_page(page)
    for service in SERVICES:
        assert f"### {service.name}" in page
        for method, path, verb, _, _ in service.routes:
            assert (service.name, method, script.template(path), verb) in named, path
    for (method, path), (target, _, _) in CONTROL_ROUTES.items():
        assert f"- {method} `{path}` `{target}`" in page, path
    assert "`billing_catalog`" in page and "`stale-lockfile`" in page
    assert len(page.encode()) <= 13_000


def test_a_route_left_off_the_page_is_missed() -> None:
    page = _script().render()
    line = "- POST `/nodes/{node}:stop` `stop` (tpu.nodes.stop)"
    assert line in page
    named = routes_on_page(page)
    stop = "/projects/{project}/locations/{zone}/nodes/{node}:stop"
    assert ("tpu.googleapis.com", "POST", "/v2alpha1" + stop, "stop") in named
    less = routes_on_page(page.replace(line + "\n", ""))
    assert named - less == {
        ("tpu.googleapis.com", "POST", version + stop, "stop") for version in ("/v2", "/v2alpha1")
    }


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
