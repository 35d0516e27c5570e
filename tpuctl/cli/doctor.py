"""tpuctl doctor SCRIPT: the static checks of a training script (docs/doctor.md)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from tpuctl.cli import render
from tpuctl.cli.checkup import lines, summary
from tpuctl.cli.options import Json
from tpuctl.errors import UsageError


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
        sys.stdout.write(lines(findings))
        render.info(f"{rel} on a {acc.name}: {summary(findings)}")
    if any(f.severity == "error" for f in findings):
        raise typer.Exit(1)
