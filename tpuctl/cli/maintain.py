"""tpuctl maintain NAME [--now]"""

from __future__ import annotations

from typing import Annotated

from tpuctl.cli import declare, render, views
from tpuctl.cli.options import Json, NodeName, Project, Zone, app_of


def maintain(
    ctx: declare.Context,
    name: NodeName,
    zone: Zone = None,
    project: Project = None,
    now: Annotated[
        bool,
        declare.Option("--now", help="Start the pending maintenance now, instead of showing it."),
    ] = False,
    json_out: Json = False,
) -> None:
    """Show a TPU VM's upcoming host maintenance, or start it now.

    A TPU VM stops for a host maintenance. With --now, a pending maintenance that can
    be rescheduled starts at once: on Compute Engine through instances.performMaintenance
    on each VM of the node; on the Cloud TPU API through its v2alpha1 method
    nodes.performMaintenance (v2 has none; see
    https://cloud.google.com/tpu/docs/reference/rest/v2alpha1/projects.locations.nodes/performMaintenance).

    Example: tpuctl maintain my-tpu --now
    """
    from tpuctl.services import maintenance

    app = app_of(ctx)
    target = app.target(project, zone)
    if now:
        node = maintenance.start_now(app.backends(), target, name, render.info)
        render.info(f"started the maintenance of {name}: {views.state_text(node)}")
    else:
        node = maintenance.find(app.backends(), target, name, render.info)[1]
    if json_out:
        upcoming = node.maintenance.to_json() if node.maintenance else None
        render.print_json({"name": node.name, "zone": node.zone, "upcomingMaintenance": upcoming})
        return
    if node.maintenance is None:
        render.out().print(f"no maintenance announced for {name}", highlight=False, markup=False)
        return
    line = f"{name}  {node.zone}  {node.state}  maintenance: {views.maintenance_text(node)}"
    render.out().print(line, highlight=False, markup=False)
