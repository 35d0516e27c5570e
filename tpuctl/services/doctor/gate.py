"""The doctor's gate inside `tpuctl run`, before anything is created: the script's
findings, and whether they stop the run. A mistake found here costs no TPU time."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tpuctl.errors import CheckFailed, NotPythonError

if TYPE_CHECKING:
    from tpuctl.services.doctor import Finding
    from tpuctl.services.run.spec import RunSpec


@dataclass
class Verdict:
    findings: list[Finding]
    failure: CheckFailed | None = None  # the run must stop (errors, and no --force)
    forced: int = 0  # errors --force runs despite


def summary(findings: list[Finding]) -> str:
    from tpuctl.services.doctor import SEVERITIES

    counts = [(sum(f.severity == s for f in findings), s) for s in SEVERITIES]
    return ", ".join(f"{n} {s}{'' if n == 1 else 's'}" for n, s in counts)


def check_run(root: Path, rel: str, spec: RunSpec, force: bool) -> Verdict:
    """The findings for the job's script on the job's slice and image (an existing node's
    image is not known here: not checked). Errors stop the run unless `force`; a script
    that is not Python (a shell script) is not checked, but a `.py` file that does not
    parse stops it unless `force`."""
    from tpuctl.frameworks import runtime_of
    from tpuctl.services.doctor import check

    acc = spec.shape if spec.shape.known else None
    runtime = None if spec.node else runtime_of(spec.version, acc)
    try:
        findings = check(root / rel, root, acc, runtime, spec.setup, spec.environment)
    except NotPythonError:
        if rel.endswith(".py") and not force:
            raise
        return Verdict([])
    errors = [f for f in findings if f.severity == "error"]
    if errors and not force:
        first = errors[0]
        failure = CheckFailed(
            f"tpuctl doctor found {summary(findings)} in {rel}; nothing was created "
            f"(first: {first.file}:{first.line}: {first.check})",
            hint="fix the errors above, or run again with --force (--no-check skips the check)",
        )
        return Verdict(findings, failure)
    return Verdict(findings, forced=len(errors))
