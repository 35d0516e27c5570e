"""tpuctl quota request"""

from __future__ import annotations

from typing import Annotated

from tpuctl.cli import declare, render
from tpuctl.cli.options import MAX_COUNT, Json, Project, Zone, app_of, whole_number
from tpuctl.errors import UsageError


def request(
    ctx: declare.Context,
    quota_id: Annotated[
        str, declare.Argument(help="The quota, e.g. TPUV6EPerProjectPerRegionForTPUAPI.")
    ],
    value: Annotated[
        int,
        declare.Option(
            "--value", parser=whole_number("--value", 1, MAX_COUNT), help="The limit you ask for."
        ),
    ],
    region: Annotated[
        str | None, declare.Option("--region", "-r", help="For a regional quota: the region.")
    ] = None,
    zone: Zone = None,
    justification: Annotated[
        str, declare.Option("--justification", help="Why you need it (Google reads it).")
    ] = "",
    email: Annotated[
        str | None,
        declare.Option("--email", help="Who Google may contact about it (default: you)."),
    ] = None,
    allow_decrease: Annotated[
        bool,
        declare.Option("--allow-decrease", help="Let --value lower a limit that is higher now."),
    ] = False,
    project: Project = None,
    json_out: Json = False,
) -> None:
    """File a TPU quota increase request (a quota preference).

    A regional quota takes --region (or --zone, for its region), a zonal one --zone.
    A value below the current limit is refused unless --allow-decrease.
    `tpuctl quota` shows the request and its state.
    Example: tpuctl quota request TPUV6EPerProjectPerRegionForTPUAPI --value 512 --region us-east5
    """
    from tpuctl import catalog
    from tpuctl.config import check_shape

    spec = catalog.QUOTAS_BY_ID.get(quota_id)
    if spec is None:
        raise UsageError(
            f"invalid QUOTA_ID {quota_id!r}: not a TPU quota tpuctl knows",
            hint="`tpuctl quota --json` lists the quota ids (quotaId)",
        )
    if zone is not None and not zone.strip():
        raise UsageError(f"invalid --zone {zone!r}: empty; give a zone like us-central1-a")
    if region and zone:
        raise UsageError("--region and --zone are exclusive: choose one")
    if zone:
        location = spec.location(check_shape("zone", zone, "--zone"))
    elif region and spec.dimension == "region":
        location = check_shape("region", region, "--region")
    else:
        raise UsageError(f"{quota_id} is per {spec.dimension}: pass --{spec.dimension}")
    app = app_of(ctx)
    target = app.target(project, zone, need_zone=False)  # an unknown zone: named
    contact = email or app.factory.account()
    if not contact:
        raise UsageError("a quota increase request needs a contact: pass --email ADDRESS")
    from tpuctl.services import quota

    filed = quota.file_request(
        app.factory.quotas(),
        target.project,
        spec,
        location,
        value,
        justification=justification,
        email=contact,
        allow_decrease=allow_decrease,
    )
    made, now = filed.request, "unknown" if filed.current is None else filed.current
    if json_out:
        render.print_json({**made.to_json(), "currentLimit": filed.current})
        return
    render.out().print(
        f"requested {value} {spec.unit} of {quota_id} in {spec.dimension} {location}, "
        f"now {now} ({made.name.rsplit('/', 1)[-1]}): {made.state}",
        highlight=False,
        markup=False,
    )
    if made.pending:
        render.info("note: Google reviews increases, which can take hours; `tpuctl quota` shows it")
