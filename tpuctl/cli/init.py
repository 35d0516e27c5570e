"""tpuctl init"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated

from tpuctl import catalog
from tpuctl.catalog import canonical_accelerator
from tpuctl.cli import declare, render
from tpuctl.cli.options import Json, Project, Zone, app_of

if TYPE_CHECKING:
    from tpuctl.services.init import InitReport, Step

MAX_RETENTION_DAYS = 3650  # ten years: a larger number is a typo

_MARK = {
    "ok": "ok",
    "done": "done",
    "pending": "pending",
    "todo": "to do",
    "skipped": "skipped",
    "failed": "FAILED",
}


def _retention(value: str | None) -> int | None:
    """--job-retention: whole days (`30` or `30d`), or 0 / `off` for none."""
    if value is None:
        return None
    text = value.strip().lower()
    if text in ("0", "0d", "off", "never"):
        return 0
    match = re.fullmatch(r"(\d{1,5})d?", text)
    if not match or not 1 <= int(match.group(1)) <= MAX_RETENTION_DAYS:
        raise declare.BadParameter(
            f"{value!r}: whole days from 1 to {MAX_RETENTION_DAYS} (e.g. 30 or 30d), "
            "or 0 to offer no rule",
            param_hint="'--job-retention'",
        )
    return int(match.group(1))


def init(
    ctx: declare.Context,
    accelerator: Annotated[
        str | None,
        declare.Option(
            "--accelerator",
            "-a",
            callback=lambda v: canonical_accelerator(v) if v else v,
            help="The TPU type you mean to use, for the quota check (e.g. v5litepod-8).",
        ),
    ] = None,
    zone: Zone = None,
    project: Project = None,
    email: Annotated[
        str | None,
        declare.Option("--email", help="Contact for a quota increase request (default: you)."),
    ] = None,
    service_account: Annotated[
        str | None,
        declare.Option(
            "--service-account",
            help="The service account your TPU VMs will run as (default: the project's "
            "default compute account), checked in step 4.",
        ),
    ] = None,
    job_retention: Annotated[
        int | None,
        declare.Option(
            "--job-retention",
            metavar="DAYS",
            parser=_retention,
            help="Offer a lifecycle rule on the bucket deleting job folders (logs, records, "
            "outputs) older than DAYS days; 0: offer none. The staged code is never "
            "deleted.  [default: 30]",
        ),
    ] = None,
    yes: Annotated[
        bool, declare.Option("--yes", "-y", help="Make every change without asking.")
    ] = False,
    json_out: Json = False,
) -> None:
    """Check a project and prepare it for tpuctl.

    Steps: APIs, permissions, the VMs' service account, quota, bucket (and a lifecycle
    rule for old job folders), config.

    Each step says what it found and what it did; nothing changes without your consent
    (--yes gives it). Running it again changes nothing. Exit 0 when nothing is left for
    you to do (a quota request under review is only waited for), 1 otherwise.
    Example: tpuctl init --accelerator v5litepod-8 --zone us-west4-a --yes
    """
    from tpuctl.config import configured_service_account, load_config_file, write_config_values
    from tpuctl.services import init as init_svc

    app = app_of(ctx)
    target = app.target(project, zone)
    shape = catalog.shape(accelerator) if accelerator else None
    init_svc.validate(shape, target.zone)
    factory = app.factory

    def consent(action: str) -> bool:
        if yes:  # said before it is done, so the config file never changes unannounced
            render.info(f"{action[0].upper()}{action[1:]} (--yes)")
            return True
        if not app.stdin_isatty or json_out:
            return False
        return render.confirm(f"{action[0].upper()}{action[1:]}?", default=True)

    adapters = init_svc.InitAdapters(
        service_usage=factory.service_usage(),
        tpu=app.tpu(),
        quotas=factory.quotas(),
        bucket=lambda name: factory.bucket(name, target.project),
        write_config=lambda values, project: str(write_config_values(values, project=project)),
        iam=factory.iam(),
        backends=factory.backends(),
    )
    with render.progress("enable operation") as progress:
        spec = init_svc.InitSpec(
            target=target,
            shape=shape,
            account=factory.account(),
            endpoint=factory.describe_endpoint(),
            config=load_config_file(),
            email=email or factory.account(),
            consent=consent,
            progress=progress,
            service_account=service_account or configured_service_account(),
            job_retention=init_svc.JOB_RETENTION_DAYS if job_retention is None else job_retention,
        )
        report = init_svc.run(adapters, spec, lambda s: None if json_out else _print(s))
    if json_out:
        render.print_json(report.to_json())
    else:
        _summary(report, yes)
    if report.blocked:
        raise declare.Exit(1)


def _print(step: Step) -> None:
    console = render.out()
    console.print(f"{step.name}: {_MARK[step.status]}: {step.found}", highlight=False, markup=False)
    if step.did:
        console.print(f"  did: {step.did}", highlight=False, markup=False)
    if step.todo:
        label = {"pending": "waiting", "skipped": "to add it"}.get(step.status, "to do")
        console.print(f"  {label}: {step.todo}", highlight=False, markup=False)


def _summary(report: InitReport, yes: bool) -> None:
    console = render.out()
    if report.ready:
        console.print(f"all is ready in project {report.project}", highlight=False, markup=False)
        return
    pending = [s.name for s in report.steps if s.status == "pending"]
    left = [s.name for s in report.steps if s.status in ("todo", "failed")]
    if left:
        line = f"not ready: left for you: {', '.join(left)}"
        if not yes and any(s.status == "todo" for s in report.steps):
            line += " (run again with --yes to let tpuctl do what it can)"
    else:
        line = f"all done that can be done now in project {report.project}"
    if pending:
        line += f"; still pending: {', '.join(pending)} (Google decides; see `tpuctl quota`)"
    console.print(line, highlight=False, markup=False)
