"""tpuctl quota (and its group: `tpuctl quota request`, in quota_request.py)"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from tpuctl.cli import declare, quota_request, render
from tpuctl.cli.declare import App
from tpuctl.cli.options import Filter, Format, Json, Limit, Project, SortBy, Zone, app_of
from tpuctl.errors import UsageError

if TYPE_CHECKING:
    from rich.table import Table

    from tpuctl.cli.options import AppEnv
    from tpuctl.cloud.quota import QuotaRequest
    from tpuctl.quota_pool import QuotaPool
    from tpuctl.services.quota import QuotaReport, QuotaRow

app = App()
app.command("request")(quota_request.request)


@app.callback(invoke_without_command=True)
def quota(
    ctx: declare.Context,
    zone: Zone = None,
    region: Annotated[
        str | None, declare.Option("--region", "-r", help="A region, e.g. us-east5.")
    ] = None,
    all_regions: Annotated[
        bool, declare.Option("--all-regions", help="Every region with TPUs, quota or nodes.")
    ] = False,
    project: Project = None,
    json_out: Json = False,
    fmt: Format = None,
    filter_text: Filter = None,
    sort_by: SortBy = None,
    limit: Limit = None,
) -> None:
    """TPU quota limits, what uses them, and the headroom, per region.

    Without a flag: the region of the configured zone (every region if none is configured).
    Quota increase requests (`tpuctl quota request`) are listed with their state.
    Example: tpuctl quota --region us-east5
    """
    from tpuctl.config import check_shape
    from tpuctl.services import quota as quota_svc

    if ctx.invoked_subcommand:
        return

    if sum(bool(x) for x in (zone, region, all_regions)) > 1:
        raise UsageError("--zone, --region and --all-regions are exclusive: choose one")
    app = app_of(ctx)
    target = app.target(project, zone, need_zone=False)
    scope: dict[str, str] = {}
    if zone:
        scope = {"zone": target.zone}
    elif region:
        scope = {"region": check_shape("region", region, "--region")}
    elif not all_regions and target.zone != "-":
        scope = {"region": target.region}
    report = quota_svc.report(app.tpu(), app.factory.quotas(), target.project, **scope)
    if fmt or filter_text or sort_by or limit:  # over the quota rows of --json's "quotas"
        from tpuctl.cli.projection import chosen

        rows = report.to_json()["quotas"]
        rows = [rows[i] for i in chosen(rows, filter_text, sort_by, limit)]
        render.print_format(rows, fmt) if fmt else render.print_json(rows)
        return
    pools = _pools(app, target.project, scope)
    if json_out:
        more = {p.key: [r.to_json(p.key) for r in p.rows] for p in pools}
        render.print_json({**report.to_json(), **more})
    else:
        _print(report, explicit=bool(scope))
        _print_requests(report.requests)
        for pool in pools:
            _print_pool(pool)
    if report.missing and not json_out:
        render.info(
            "note: the Cloud Quotas API returned nothing for "
            f"{', '.join(report.missing)}: their limits are unknown (?)"
        )
    if report.limits_error is not None:
        e = report.limits_error
        render.info(f"note: limits unknown, showing usage only: {e.message}")
        if e.hint:
            render.info(f"note: {e.hint}")
    elif not json_out:
        render.info(
            f"request more: {quota_svc.request_url(target.project)} "
            "(or `gcloud quotas preferences create --service=tpu.googleapis.com "
            f"--quota-id=ID --preferred-value=N --dimensions=region=R --project={target.project}`)"
        )


def _print(report: QuotaReport, explicit: bool) -> None:
    console = render.out()
    printed = after_table = False
    for region in report.regions:
        rows = report.shown_rows(region)
        zeros = report.zero_families(region)
        if not (rows or zeros or explicit):
            continue
        if printed and (rows or after_table):
            console.print()
        printed, after_table = True, bool(rows)
        title = f"[bold]{render.escape(region)}[/]"
        if not rows:
            what = f"no quota for {', '.join(zeros)}" if zeros else "no TPU nodes"
            console.print(f"{title}  {render.escape(what)}", highlight=False)
            continue
        console.print(f"{title}  (project {render.escape(report.project)})", highlight=False)
        render.show(_table(rows), console)
        if zeros:
            console.print(f"no quota: {', '.join(zeros)}", highlight=False, markup=False)
    if not printed:
        render.info(f"no TPU quota or nodes in any region of project {report.project}")


def _pools(app: AppEnv, project: str, scope: dict[str, str]) -> list[QuotaPool]:
    """The TPU quota pools of the APIs that have their own (Compute Engine's), in the
    regions asked about (all that offer their TPUs when none is); an API whose quota
    cannot be read (its API off, no permission) is said and left out."""
    from tpuctl import catalog
    from tpuctl.errors import TpuctlError

    where = scope.get("region") or (catalog.region_of(scope["zone"]) if "zone" in scope else "")
    pools = []
    for backend in app.backends():
        try:
            found = backend.own_quota(app.factory.quotas(), project, [where] if where else None)
        except TpuctlError as e:
            render.info(f"note: {backend.kind.title}'s TPU quota unknown: {e.message}")
            continue
        if found is not None:
            pools.append(found)
    return pools


def _print_pool(pool: QuotaPool) -> None:
    """An API's own pool: the quotas with a limit or a use, per region."""
    from rich.markup import escape
    from rich.table import Table

    shown = [r for r in pool.rows if r.limit or r.used]
    console = render.out()
    console.print()
    heading = f"[bold]{escape(pool.title)}[/] TPU quota ({escape(pool.about)})"
    console.print(heading, highlight=False)
    if not shown:
        console.print("none in these regions", highlight=False, markup=False)
        return
    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("REGION", "QUOTA", "FAMILY"):
        table.add_column(col, no_wrap=True)
    for col in ("LIMIT", "IN USE"):
        table.add_column(col, no_wrap=True, justify="right")
    for r in shown:
        limit = "?" if r.limit is None else str(r.limit)
        table.add_row(r.region, r.quota_id, r.family or "-", limit, str(r.used))
    render.show(table, console)


def _print_requests(requests: list[QuotaRequest]) -> None:
    if not requests:
        return
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("REQUEST", "QUOTA", "WHERE"):
        table.add_column(col, no_wrap=True)
    for col in ("WANTED", "GRANTED"):
        table.add_column(col, no_wrap=True, justify="right")
    table.add_column("STATE", no_wrap=True)
    for r in requests:
        granted = "?" if r.granted is None else str(r.granted)
        where = r.location or "everywhere"
        name = r.name.rsplit("/", 1)[-1]
        table.add_row(name, r.quota_id, where, str(r.preferred), granted, r.state)
    console = render.out()
    console.print()
    console.print("quota increase requests", highlight=False, markup=False)
    render.show(table, console)


def _table(rows: list[QuotaRow]) -> Table:
    from rich.table import Table

    from tpuctl.services.quota import scheduling_label

    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("FAMILY", "SCHEDULING", "PER"):
        table.add_column(col, no_wrap=True)
    for col in ("LIMIT", "IN USE", "HEADROOM"):
        table.add_column(col, no_wrap=True, justify="right")
    table.add_column("UNIT", no_wrap=True)
    table.add_column("USED BY")
    for r in rows:
        names = [u.node.name for u in r.usage]
        used_by = ", ".join(names[:3]) + (f" +{len(names) - 3}" if len(names) > 3 else "")
        headroom = "?" if r.headroom is None else str(r.headroom)
        if r.headroom is not None and r.headroom <= 0:
            headroom = f"[bold red]{headroom}[/]"
        per = "region" if r.spec.dimension == "region" else f"zone {r.location.rsplit('-', 1)[-1]}"
        table.add_row(
            r.spec.family,
            scheduling_label(r.spec),
            per,
            "?" if r.limit is None else str(r.limit),
            str(r.in_use),
            headroom,
            r.spec.unit,
            render.escape(used_by) or "-",
        )
    return table
