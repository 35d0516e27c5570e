"""tpuctl list"""

from __future__ import annotations

from typing import Annotated

import typer

from tpuctl.cli import render
from tpuctl.cli.options import Json, Project, Zone, env


def list_nodes(
    zone: Zone = None,
    project: Project = None,
    all_zones: Annotated[
        bool, typer.Option("--all-zones", help="Every zone, in one call.")
    ] = False,
    json_out: Json = False,
) -> None:
    """List TPU VMs in a zone (or every zone).

    Example: tpuctl list --all-zones --json
    """
    app = env()
    target = app.target(project, None if all_zones else zone, need_zone=False)
    zone_part = "-" if all_zones else target.zone
    parent = f"projects/{target.project}/locations/{zone_part}"
    nodes = sorted(app.tpu().list_nodes(parent), key=lambda n: (n.zone, n.name))
    if json_out:
        from tpuctl.services import cost

        render.print_json(
            [
                {**n.to_json(), "hourlyUsd": cost.node_hourly(n), "costSoFarUsd": cost.so_far(n)}
                for n in nodes
            ]
        )
        return
    if not nodes:
        where = "any zone" if zone_part == "-" else f"zone {zone_part}"
        render.info(f"no TPU nodes in {where} of project {target.project}")
        return
    render.out().print(render.node_table(nodes))
    from tpuctl.services import cost

    render.info(f"costs are {cost.NOTE}")
