"""tpuctl describe NAME"""

from __future__ import annotations

from tpuctl.cli import declare, render, views
from tpuctl.cli.options import Json, NodeName, Project, Zone, app_of


def describe(
    ctx: declare.Context,
    name: NodeName,
    zone: Zone = None,
    project: Project = None,
    json_out: Json = False,
) -> None:
    """Show one TPU VM: state, type, workers, addresses, labels.

    Example: tpuctl describe my-tpu --json
    """
    from tpuctl.services.names import validate_name

    validate_name(name)
    app = app_of(ctx)
    target = app.target(project, zone)
    from tpuctl.services.locate import locate

    # the Cloud TPU API, then Compute Engine; then the other zones
    _, node = locate(app.backends(), target, name, render.info)
    if json_out:
        render.print_json({**node.to_json(), "raw": node.raw})
        return
    render.show(views.describe_node(node))
