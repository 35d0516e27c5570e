"""`tpuctl doctor --image IMAGE`: the doctor's checks of a container image (its Python's
TPU runtime, read from its layers whole; whether the VM's service account may pull it),
printed as a script's findings (docs/doctor.md)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from tpuctl.cli import declare, render

if TYPE_CHECKING:
    from tpuctl.cli.options import AppEnv
    from tpuctl.services.doctor import Finding


def image_lines(findings: list[Finding]) -> str:
    """An image's findings as text: `IMAGE: SEVERITY: MESSAGE [CHECK]` and the fix (an
    image has no line)."""
    return "".join(
        f"{f.file}: {f.severity}: {f.message} [{f.check}]\n    fix: {f.fix}\n" for f in findings
    )


def doctor_image(
    app: AppEnv,
    text: str,
    project: str | None,
    service_account: str | None,
    json_out: bool,
) -> None:
    """Resolve IMAGE, read it whole and print its findings; exit 1 on an error."""
    from tpuctl.cloud.images import parse_image
    from tpuctl.config import configured_service_account
    from tpuctl.services.doctor.gate import summary
    from tpuctl.services.doctor.image import check_image

    ref = parse_image(text)
    target = app.target(project, None, need_zone=False)
    factory = app.factory
    images = factory.images()
    resolved = images.resolve(ref)
    account = service_account or configured_service_account()
    report = check_image(images, factory.iam(), resolved, target.project, account, budget=None)
    found = report.frameworks
    if json_out:
        render.print_json(
            {
                "image": str(ref),
                "pinned": resolved.pinned,
                "frameworks": found,
                "findings": [f.to_json() for f in report.findings],
            }
        )
    else:
        sys.stdout.write(image_lines(report.findings))
        has = (
            "not read"
            if found is None
            else ", ".join(f"{name} {version}".strip() for name, version in sorted(found.items()))
        )
        render.info(
            f"{ref} ({resolved.digest}): {has or 'no TPU framework'}; {summary(report.findings)}"
        )
    if any(f.severity == "error" for f in report.findings):
        raise declare.Exit(1)
