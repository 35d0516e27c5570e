"""tpuctl quota request"""

from __future__ import annotations

from typing import Annotated

import typer

from tpuctl.cli import render
from tpuctl.cli.options import Json, Project, Zone, app_of
from tpuctl.errors import UsageError


def request(
    ctx: typer.Context,
    quota_id: Annotated[
        str, typer.Argument(help="The quota, e.g. TPUV6EPerProjectPerRegionForTPUAPI.")
    ],
    value: Annotated[int, typer.Option("--value", min=1, help="The limit you ask for.")],
    region: Annotated[
        str | None, typer.Option("--region", "-r", help="For a regional quota: the region.")
    ] = None,
    zone: Zone = None,
    justification: Annotated[
        str, typer.Option("--justification", help="Why you need it (Google reads it).")
    ] = "",
    email: Annotated[
        str | None,
        typer.Option("--email", help="Who Google may contact about it (default: you)."),
    ] = None,
    project: Project = None,
    json_out: Json = False,
) -> None:
    """File a TPU quota increase request (a quota preference).

    A regional quota takes --region (or --zone, for its region), a zonal one --zone.
    `tpuctl quota` shows the request and its state.
    Example: tpuctl quota request TPUV6EPerProjectPerRegionForTPUAPI --value 16 --region us-east5
    """
    from tpuctl import catalog
    from tpuctl.config import check_shape

    spec = catalog.QUOTAS_BY_ID.get(quota_id)
    if spec is None:
        raise UsageError(
            f"invalid QUOTA_ID {quota_id!r}: not a TPU quota tpuctl knows",
            hint="`tpuctl quota --json` lists the quota ids (quotaId)",
        )
    if region and zone:
        raise UsageError("--region and --zone are exclusive: choose one")
    if zone:
        location = spec.location(check_shape("zone", zone, "--zone"))
    elif region and spec.dimension == "region":
        location = check_shape("region", region, "--region")
    else:
        raise UsageError(f"{quota_id} is per {spec.dimension}: pass --{spec.dimension}")
    app = app_of(ctx)
    target = app.target(project, None, need_zone=False)
    contact = email or app.factory.account()
    if not contact:
        raise UsageError("a quota increase request needs a contact: pass --email ADDRESS")
    made = app.factory.quotas().request_increase(
        target.project, quota_id, value, spec.dimension, location, justification, contact
    )
    if json_out:
        render.print_json(made.to_json())
        return
    render.out().print(
        f"requested {value} {spec.unit} of {quota_id} in {spec.dimension} {location} "
        f"({made.name.rsplit('/', 1)[-1]}): {made.state}",
        highlight=False,
    )
    if made.pending:
        render.info("note: Google reviews increases, which can take hours; `tpuctl quota` shows it")
