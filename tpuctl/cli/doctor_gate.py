"""The doctor's findings as text, and the gate `tpuctl run` passes before creating
anything (its rules in services/doctor/gate.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tpuctl.cli import render

if TYPE_CHECKING:
    from tpuctl.services.doctor import Finding
    from tpuctl.services.node_doctor.live import Report
    from tpuctl.services.run.spec import RunSpec


def lines(findings: list[Finding]) -> str:
    return "".join(
        f"{f.file}:{f.line}: {f.severity}: {f.message} [{f.check}]\n    fix: {f.fix}\n"
        for f in findings
    )


def gate_run(root: Path, rel: str, spec: RunSpec, force: bool) -> None:
    """The doctor's gate inside `tpuctl run` (services/doctor/gate.py): its findings on
    stderr; an error stops the run unless `force`."""
    from tpuctl.services.doctor import gate

    verdict = gate.check_run(root, rel, spec, force)
    sys.stderr.write(lines(verdict.findings))
    if verdict.failure is not None:
        raise verdict.failure
    if verdict.forced:
        render.info(f"--force: running despite {verdict.forced} error(s)")


def gate_image(factory: Any, spec: RunSpec, project: str, check: bool, force: bool) -> None:
    """`tpuctl run --image`: the image resolved to its digest (a missing or refused one:
    one line, nothing created), which `spec` then pulls on every worker; unless --no-check
    the doctor's findings on it (its TPU runtime; whether the VM's account may pull it),
    an error stopping the run unless `force`."""
    from tpuctl.cli.doctor_image import image_lines
    from tpuctl.cloud.images import parse_image
    from tpuctl.errors import CheckFailed
    from tpuctl.services.doctor.gate import summary
    from tpuctl.services.doctor.image import check_image

    images = factory.images()
    resolved = images.resolve(parse_image(spec.image or ""))
    spec.image_pull = resolved.pull
    render.info(f"image: {spec.image} is {resolved.pinned}")
    if not check:
        return
    account = spec.node_spec.service_account
    findings = check_image(images, factory.iam(), resolved, project, account).findings
    sys.stderr.write(image_lines(findings))
    errors = [f for f in findings if f.severity == "error"]
    if errors and not force:
        raise CheckFailed(
            f"tpuctl doctor found {summary(findings)} in {spec.image}; nothing was created "
            f"(first: {errors[0].check})",
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
