"""The doctor's findings as text, and the gate `tpuctl run` passes before creating
anything (kept apart from cli/doctor.py, which reuses run's way of finding the script)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tpuctl.cli import render
from tpuctl.errors import CheckFailed

if TYPE_CHECKING:
    from tpuctl.catalog import SliceShape
    from tpuctl.services.doctor import Finding
    from tpuctl.services.doctor.live import Report


def lines(findings: list[Finding]) -> str:
    return "".join(
        f"{f.file}:{f.line}: {f.severity}: {f.message} [{f.check}]\n    fix: {f.fix}\n"
        for f in findings
    )


def summary(findings: list[Finding]) -> str:
    from tpuctl.services.doctor import SEVERITIES

    counts = [(sum(f.severity == s for f in findings), s) for s in SEVERITIES]
    return ", ".join(f"{n} {s}{'' if n == 1 else 's'}" for n, s in counts)


def gate(
    root: Path,
    rel: str,
    shape: SliceShape,
    force: bool,
    runtime_version: str | None = None,
    setup: str | None = None,
) -> None:
    """The check inside `tpuctl run`, before anything is created: errors stop the run
    (unless `force`), warnings and hints are printed on stderr and the run goes on.
    Scripts that are not Python (a shell script) are not checked. `runtime_version`: the
    image the job gets (None: unknown, e.g. an existing node's: not checked)."""
    from tpuctl.services.doctor import NotPythonError, check

    try:
        acc = shape if shape.known else None
        findings = check(root / rel, root, acc, runtime_version, setup)
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


def node_report(report: Report) -> str:
    """`tpuctl doctor NODE`'s text: a line per check, its evidence and fix, a summary."""
    out = []
    for c in report.checks:
        where = f"w{c.worker}: " if c.worker is not None else ""
        out.append(f"{c.status.upper():4}  {c.check:16} {where}{c.summary}\n")
        out += [
            f"      {line}\n"
            for line in c.evidence
            if c.status != "pass" or c.check in ("last-job",)
        ]
        if c.fix and c.status in ("fail", "warn"):
            out.append(f"      fix: {c.fix}\n")
    counts = {
        s: sum(c.status == s for c in report.checks) for s in ("fail", "warn", "pass", "skip")
    }
    out.append(f"{report.node}: " + ", ".join(f"{n} {s}" for s, n in counts.items()) + "\n")
    return "".join(out)
