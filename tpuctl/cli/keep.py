"""tpuctl keep NAME [--off]"""

from __future__ import annotations

from typing import Annotated

import typer

from tpuctl.cli import render
from tpuctl.cli.options import NodeName, Project, Zone, app_of


def keep(
    ctx: typer.Context,
    name: NodeName,
    off: Annotated[bool, typer.Option("--off", help="Make the node collectable again.")] = False,
    zone: Zone = None,
    project: Project = None,
) -> None:
    """Exempt a node from `tpuctl gc` and idle autodown.

    The node gets the label tpuctl-keep=true.

    Example: tpuctl keep my-tpu      (undo: tpuctl keep my-tpu --off)
    """
    from tpuctl.models import KEEP
    from tpuctl.services.lookup import find_node
    from tpuctl.services.names import validate_name
    from tpuctl.services.nodes import set_labels

    validate_name(name)
    app = app_of(ctx)
    target = app.target(project, zone)
    full_name = f"{target.parent}/nodes/{name}"
    api, _ = find_node(app.backends(), full_name)
    set_labels(api, full_name, {KEEP: None if off else "true"})
    render.info(
        f"{name}: {'no longer kept; gc may collect it' if off else 'kept: gc will not touch it'}"
    )
