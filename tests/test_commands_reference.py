"""docs/commands.md's generated section is what scripts/commands_reference.py makes from
the CLI now: a command added, renamed or given a new argument or summary without running
the script fails here."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from tests import script_modules


def _script() -> ModuleType:
    return script_modules.load("scripts/commands_reference.py")


def test_the_commands_page_lists_what_the_cli_has_now() -> None:
    script = _script()
    page = script.PAGE.read_text()
    assert page.count(script.BEGIN) == 1 and page.count(script.END) == 1
    assert page == script.render(page), f"run: {script.COMMAND}"


def test_every_visible_command_is_on_the_page_with_its_usage_and_summary() -> None:
    script = _script()
    page = script.PAGE.read_text()
    listed = list(script.commands())
    usages = [usage for usage, _ in listed]
    for usage in ("tpuctl run [OPTIONS] [SCRIPT] [SCRIPT_ARGS...]", "tpuctl quota request"):
        assert any(u.startswith(usage) for u in usages), usage
    for usage, summary in listed:
        assert f"- `{usage}`: {summary}" in page
    section = page[page.index(script.BEGIN) : page.index(script.END)]
    assert section.count("\n- `tpuctl ") == len(listed)


def test_a_stale_page_is_caught(tmp_path: Path) -> None:
    script = _script()
    page = script.PAGE.read_text()
    stale = page.replace("tpuctl create [OPTIONS] [NAME]", "tpuctl create [OPTIONS] NAME")
    assert stale != page and script.render(stale) == page
