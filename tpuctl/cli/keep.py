"""tpuctl keep NAME [--off]"""

from __future__ import annotations

from typing import Annotated

from tpuctl.cli import declare, render
from tpuctl.cli.options import NodeName, Project, Zone, app_of


def keep(
    ctx: declare.Context,
    name: NodeName,
    off: Annotated[bool, declare.Option("--off", help="Make the node collectable again.")] = False,
    zone: Zone = None,
    project: Project = None,
    all_owners: Annotated[
        bool, declare.Option("--all-owners", help="Also a node another account made.")
    ] = False,
) -> None:
    """Exempt a node from `tpuctl gc` and idle autodown.

    The node gets the label tpuctl-keep=true. Only your account's nodes (tpuctl-owner),
    unless --all-owners.

    Example: tpuctl keep my-tpu      (undo: tpuctl keep my-tpu --off)
    """
    from tpuctl.errors import UsageError
    from tpuctl.models import KEEP
    from tpuctl.services.lookup import find_node
    from tpuctl.services.names import Owner, validate_name
    from tpuctl.services.nodes import set_labels

    validate_name(name)
    app = app_of(ctx)
    target = app.target(project, zone)
    full_name = f"{target.parent}/nodes/{name}"
    api, node = find_node(app.backends(), full_name)
    if node.managed and node.owner and not all_owners:
        # as gc: another account's node is theirs to keep or let go
        mine = Owner.of(app.factory.required_account("keep (whose node it is)"))
        if not mine.owns(node.owner):
            raise UsageError(
                f"node {name} is another account's (tpuctl-owner={node.owner}, you are "
                f"{mine.label}): not changed",
                hint="pass --all-owners to change it anyway",
            )
    set_labels(api, full_name, {KEEP: None if off else "true"})
    render.info(
        f"{name}: {'no longer kept; gc may collect it' if off else 'kept: gc will not touch it'}"
    )
