"""Run the real tpuctl entry point in-process against the emulator fixture."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from tpuctl.cli import main
from tpuctl.cli.options import AppEnv


@dataclass
class Result:
    code: int
    out: str
    err: str


Cli = Callable[..., Result]


@pytest.fixture
def cli(emulator, capsys, monkeypatch) -> Cli:  # noqa: ANN001
    def run(*args: str, tty: bool = False, stdin: str = "") -> Result:
        capsys.readouterr()
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        code = main(list(args), AppEnv(stdin_isatty=tty))
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


def one_line_error(result: Result, after_call: bool = False) -> str:
    """Assert the error is one `error:` line (plus at most a hint) and no traceback.

    `after_call`: the failure came from the cloud after the command had started (and
    said so on stderr, e.g. the price line before a create); only the lines from the
    error on are held to the rule.
    """
    lines = [ln for ln in result.err.splitlines() if ln.strip()]
    if after_call:
        first = next((i for i, ln in enumerate(lines) if ln.startswith("error: ")), 0)
        lines = lines[first:]
    assert "Traceback" not in result.err
    errors = [ln for ln in lines if ln.startswith("error: ")]
    assert len(errors) == 1, result.err
    assert all(ln.startswith(("error: ", "hint: ")) for ln in lines), result.err
    return errors[0]
