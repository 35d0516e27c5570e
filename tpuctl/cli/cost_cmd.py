"""tpuctl cost: what the jobs of a period cost, from their receipts in the bucket."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from tpuctl.cli import declare, render
from tpuctl.cli.jobs import Bucket
from tpuctl.cli.options import Json, Project, Wide, app_of
from tpuctl.errors import UsageError

if TYPE_CHECKING:
    from tpuctl.services.cost_report import Report, Sum

MANY = 20  # jobs: past this many, say on stderr that their receipts are being read

JOB_COLUMNS = [
    render.Col("JOB", ident=True),
    render.Col("OWNER", drop=4),
    render.Col("TYPE"),
    render.Col("STARTED", drop=3),
    render.Col("STATUS"),
    render.Col("BILLED", right=True),
    render.Col("COST", right=True),
    render.Col("IDLE", right=True, drop=2),
    render.Col("OVERHEAD", right=True, drop=1),
]
SUM_COLUMNS = [
    render.Col("JOBS", right=True),
    render.Col("BILLED", right=True),
    render.Col("COST", right=True),
    render.Col("IDLE", right=True, drop=2),
    render.Col("OVERHEAD", right=True, drop=1),
]


def cost(
    ctx: declare.Context,
    since: Annotated[
        str,
        declare.Option(
            "--since", help="The period: jobs started this long ago or since (30d, 12h)."
        ),
    ] = "30d",
    owner: Annotated[
        str | None,
        declare.Option("--owner", help="Jobs of this owner: an account's email, or its label."),
    ] = None,
    all_owners: Annotated[bool, declare.Option("--all-owners", help="Everyone's jobs.")] = False,
    project: Project = None,
    bucket: Bucket = None,
    json_out: Json = False,
    wide: Wide = False,
) -> None:
    """What your jobs cost over a period, from their receipts.

    Each job started in the period (and each still running, its cost so far), then the
    sums by day, by accelerator type and by owner, and the total: billed time, dollars at
    list price, the share of billed time the chips were idle (estimated from the mean
    TensorCore use) and the share outside the script (boot, start, environment,
    recovery, teardown). By default only your account's jobs.

    Example: tpuctl cost --since 7d --all-owners
    """
    from tpuctl.cli.jobs import job_bucket
    from tpuctl.durations import parse_duration
    from tpuctl.services import cost_report
    from tpuctl.services.names import Owner

    if owner and all_owners:
        raise UsageError("--owner and --all-owners are exclusive: choose one")
    period = parse_duration(since, "--since")
    app = app_of(ctx)
    if all_owners:
        whose = None
    else:  # as gc's: an email or a tpuctl-owner label, else the account tpuctl acts as
        whose = Owner.of(owner or app.factory.required_account("cost (whose jobs to count)"))
    b = job_bucket(app, project, bucket)

    def told(count: int) -> None:
        if count > MANY:
            render.info(f"reading the receipts of {count} jobs")

    found = cost_report.report(b, period, whose, told=told)
    if json_out:
        render.print_json(found.to_json())
        return
    if not found.rows:
        render.info(f"no jobs since {found.to_json()['period']['since']}")
        return
    _show(found, wide)


def _show(found: Report, wide: bool) -> None:
    from tpuctl.services import cost_report

    rows = [
        [
            r.job,
            r.owner,
            r.accelerator,
            r.day,
            r.status,
            _hours(r.billed),
            _usd(r.usd, r.billed),
            "-" if r.idle is None or not r.billed else f"{r.idle / r.billed:.0%}",
            "-" if r.overhead is None or not r.billed else f"{r.overhead / r.billed:.0%}",
        ]
        for r in found.rows
    ]
    render.show_fitted(JOB_COLUMNS, rows, wide)
    for title, key in (
        ("DAY", lambda r: r.day),
        ("TYPE", lambda r: r.accelerator),
        ("OWNER", lambda r: r.owner),
    ):
        sums = found.by(key)
        render.out().print()
        cols = [render.Col(title, ident=True), *SUM_COLUMNS]
        render.show_fitted(cols, [[k, *_sum_cells(v)] for k, v in sums.items()], wide)
    total = found.total
    render.out().print()
    render.show_fitted(
        [render.Col("TOTAL", ident=True), *SUM_COLUMNS], [["all", *_sum_cells(total)]], wide
    )
    if total.unpriced:
        render.info(
            f"{total.unpriced} job(s) with no public price not included in the dollars "
            "(their time is)"
        )
    if found.without_receipt:
        render.info(
            f"{found.without_receipt} job(s) with no receipt (never started, or their "
            "client kept none): not counted"
        )
    render.info(
        "at list price; idle is estimated from each receipt's mean TensorCore use; "
        f"{len(found.rows)} job(s) over {_hours(found.until - found.since)}"
        + ("" if cost_report.RUNNING not in {r.status for r in found.rows} else "; running: so far")
    )


def _sum_cells(s: Sum) -> list[str]:
    idle, overhead = s.idle_share, s.overhead_share
    return [
        str(s.jobs),
        _hours(s.billed),
        "no price" if s.unpriced == s.jobs else f"${s.usd:,.2f}",
        "-" if idle is None else f"{idle:.0%}",
        "-" if overhead is None else f"{overhead:.0%}",
    ]


def _hours(seconds: float | None) -> str:
    return "-" if seconds is None else render.human_age(seconds)


def _usd(usd: float | None, billed: float | None) -> str:
    if usd is None:
        return "-" if billed is None else "no price"
    return f"${usd:,.2f}"
