"""tpuctl doctor SCRIPT: the static checks, alone or as the gate before `tpuctl run`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tpuctl.cli import render
from tpuctl.cli.options import Json
from tpuctl.errors import TpuctlError, UsageError

if TYPE_CHECKING:
    from tpuctl.services.doctor import Finding


class CheckFailed(TpuctlError):
    """The script has findings of severity error (exit 1)."""


def _lines(findings: list[Finding]) -> str:
    return "".join(
        f"{f.file}:{f.line}: {f.severity}: {f.message} [{f.check}]\n    fix: {f.fix}\n"
        for f in findings
    )


def _summary(findings: list[Finding]) -> str:
    from tpuctl.services.doctor import SEVERITIES

    counts = [(sum(f.severity == s for f in findings), s) for s in SEVERITIES]
    return ", ".join(f"{n} {s}{'' if n == 1 else 's'}" for n, s in counts)


def _accelerator(name: str):  # noqa: ANN202 - AcceleratorType, imported lazily
    from tpuctl.catalog import parse_accelerator

    acc = parse_accelerator(name)
    if acc is None:
        raise UsageError(f"unknown accelerator {name!r}", hint="e.g. v3-8, v4-32, v5litepod-8")
    return acc


def doctor(
    script: Annotated[str, typer.Argument(help="The training script (.py).")],
    accelerator: Annotated[
        str, typer.Option("--accelerator", "-a", help="The slice it will run on.")
    ] = "v3-8",
    workdir: Annotated[
        Path | None, typer.Option("--workdir", help="The folder shipped (default: the script's).")
    ] = None,
    json_out: Json = False,
) -> None:
    """Check a training script for the mistakes of moving from GPUs to TPUs, before a
    node bills: one line per finding (file:line: severity: what goes wrong) and its fix.

    Exit status 1 when a finding is an error. Example: tpuctl doctor train.py -a v4-8
    """
    from tpuctl.cli.run import locate
    from tpuctl.services.doctor import check

    acc = _accelerator(accelerator)
    root, rel = locate(script, workdir)
    findings = check(root / rel, root, acc)
    if json_out:
        render.print_json([f.to_json() for f in findings])
    else:
        sys.stdout.write(_lines(findings))
        render.info(f"{rel} on a {acc.name}: {_summary(findings)}")
    if any(f.severity == "error" for f in findings):
        raise typer.Exit(1)


def gate(root: Path, rel: str, accelerator: str, force: bool) -> None:
    """The check inside `tpuctl run`, before anything is created: errors stop the run
    (unless `force`), warnings and hints are printed on stderr and the run goes on.
    Scripts that are not Python (a shell script) are not checked."""
    from tpuctl.catalog import parse_accelerator
    from tpuctl.services.doctor import NotPythonError, check

    try:
        findings = check(root / rel, root, parse_accelerator(accelerator))
    except NotPythonError:
        if rel.endswith(".py") and not force:
            raise
        return
    errors = [f for f in findings if f.severity == "error"]
    sys.stderr.write(_lines(findings))
    if errors and not force:
        first = errors[0]
        raise CheckFailed(
            f"tpuctl doctor found {_summary(findings)} in {rel}; nothing was created "
            f"(first: {first.file}:{first.line}: {first.check})",
            hint="fix the errors above, or run again with --force (--no-check skips the check)",
        )
    if errors:
        render.info(f"--force: running despite {len(errors)} error(s)")
