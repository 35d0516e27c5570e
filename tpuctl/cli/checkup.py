"""The doctor's findings as text, and the gate `tpuctl run` passes before creating
anything (kept apart from cli/doctor.py, which reuses run's way of finding the script)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tpuctl.cli import render
from tpuctl.errors import CheckFailed

if TYPE_CHECKING:
    from tpuctl.services.doctor import Finding


def lines(findings: list[Finding]) -> str:
    return "".join(
        f"{f.file}:{f.line}: {f.severity}: {f.message} [{f.check}]\n    fix: {f.fix}\n"
        for f in findings
    )


def summary(findings: list[Finding]) -> str:
    from tpuctl.services.doctor import SEVERITIES

    counts = [(sum(f.severity == s for f in findings), s) for s in SEVERITIES]
    return ", ".join(f"{n} {s}{'' if n == 1 else 's'}" for n, s in counts)


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
    sys.stderr.write(lines(findings))
    if errors and not force:
        first = errors[0]
        raise CheckFailed(
            f"tpuctl doctor found {summary(findings)} in {rel}; nothing was created "
            f"(first: {first.file}:{first.line}: {first.check})",
            hint="fix the errors above, or run again with --force (--no-check skips the check)",
        )
    if errors:
        render.info(f"--force: running despite {len(errors)} error(s)")
