"""tpuctl stop NAME / tpuctl start NAME"""

from __future__ import annotations

from tpuctl.cli import declare, render
from tpuctl.cli.options import AppEnv, Json, NodeName, NoWait, Project, Zone, app_of


def _change(
    app: AppEnv,
    name: str,
    verb: str,
    zone: str | None,
    project: str | None,
    no_wait: bool,
    json_out: bool,
) -> None:
    from tpuctl.services import power

    target = app.target(project, zone)
    _, _, doing = power.VERBS[verb]
    with render.progress(f"{doing} {name}:") as update:
        result = power.change(
            app.backends(), target, name, verb, wait=not no_wait, progress=update, say=render.info
        )
    node = result.node
    if result.already:
        render.info(f"{name} is already {node.state}")
    elif no_wait:
        render.info(f"{doing} {name}")
    if json_out:
        render.print_json(node.to_json())
    elif not no_wait:
        render.out().print(f"{name}  {node.zone}  {node.state}", highlight=False, markup=False)


def stop(
    ctx: declare.Context,
    name: NodeName,
    zone: Zone = None,
    project: Project = None,
    no_wait: NoWait = False,
    json_out: Json = False,
) -> None:
    """Stop a single-host TPU VM; it keeps its disk.

    Multi-host slices cannot stop.

    Example: tpuctl stop my-tpu
    """
    _change(app_of(ctx), name, "stop", zone, project, no_wait, json_out)


def start(
    ctx: declare.Context,
    name: NodeName,
    zone: Zone = None,
    project: Project = None,
    no_wait: NoWait = False,
    json_out: Json = False,
) -> None:
    """Start a stopped TPU VM and wait until it is READY.

    Example: tpuctl start my-tpu
    """
    _change(app_of(ctx), name, "start", zone, project, no_wait, json_out)
