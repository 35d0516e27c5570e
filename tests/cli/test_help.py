"""Help that reads well at 80 columns: values named as a CLI names them, never cut."""

from __future__ import annotations

import re

import pytest

from tpuctl.cli import app, main

COMMANDS = [
    ["create"], ["list"], ["top"], ["describe"], ["stop"], ["start"], ["delete"], ["keep"],
    ["gc"], ["quota"], ["quota", "request"], ["run"], ["doctor"], ["jobs"], ["logs"],
    ["cancel"], ["outputs"], ["ssh"], ["exec"], ["scp"], ["init"], ["emulator", "start"],
    ["emulator", "preempt"],
]  # fmt: skip


def _help(capsys, monkeypatch, args: list[str]) -> str:  # noqa: ANN001
    monkeypatch.setenv("COLUMNS", "80")
    capsys.readouterr()
    assert main([*args, "--help"]) == 0
    return str(capsys.readouterr().out)


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_help_names_values_and_fits_80_columns(capsys, monkeypatch, args) -> None:
    text = _help(capsys, monkeypatch, args)
    assert text.startswith(f"Usage: tpuctl {' '.join(args)} [OPTIONS]")
    # no Python types (`<str>`, `<list[str]>`, `<bool>`), no braces round arguments
    assert not re.search(r"<(str|int|float|bool|list\[[a-z]+\])>", text), text
    assert not re.search(r"\{[A-Za-z_]+\}", text.splitlines()[0]), text
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_examples_of_the_names(capsys, monkeypatch) -> None:
    create = _help(capsys, monkeypatch, ["create"])
    assert "Usage: tpuctl create [OPTIONS] [NAME]" in create
    assert "-z, --zone ZONE" in create and "--ttl DURATION" in create
    assert "--labels KEY=VALUE,..." in create and "--spot " in create
    scp = _help(capsys, monkeypatch, ["scp"])
    assert "Usage: tpuctl scp [OPTIONS] PATHS..." in scp


def test_every_command_is_checked() -> None:
    import typer

    group = typer.main.get_command(app)
    names = {name for name in group.commands if name not in ("emulator",)}  # type: ignore[attr-defined]
    assert names <= {args[0] for args in COMMANDS}, names - {args[0] for args in COMMANDS}
