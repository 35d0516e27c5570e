"""tpuctl stop NAME / tpuctl start NAME"""

from __future__ import annotations

from typing import Annotated

import typer

from tpuctl.cli import render
from tpuctl.cli.options import AppEnv, Json, NoWait, Project, Zone, app_of
from tpuctl.errors import Interrupted, UsageError


def _change(
    app: AppEnv,
    name: str,
    verb: str,
    zone: str | None,
    project: str | None,
    no_wait: bool,
    json_out: bool,
) -> None:
    from tpuctl.services import nodes

    nodes.validate_name(name)
    target = app.target(project, zone)
    api = app.tpu()
    full_name = f"{target.parent}/nodes/{name}"
    node = api.get_node(full_name)
    nodes.require_single_host(node, verb)
    want, allowed = ("STOPPED", {"READY"}) if verb == "stop" else ("READY", {"STOPPED"})
    doing = {"stop": "stopping", "start": "starting"}[verb]
    if node.state == want:
        render.info(f"{name} is already {want}")
    elif node.state not in allowed and node.state not in {"STOPPING", "STARTING"}:
        raise UsageError(
            f"cannot {verb} {name}: it is {node.state}",
            hint=f"{verb} works on a {' or '.join(sorted(allowed))} node",
        )
    else:
        op = api.stop_node(full_name) if verb == "stop" else api.start_node(full_name)
        if no_wait:
            render.info(f"{doing} {name}")
        else:
            try:
                with render.progress(f"{doing} {name}:") as update:
                    node = nodes.wait_for_state(
                        api,
                        full_name,
                        {want},
                        operation=op,
                        progress=update,
                        fail_states=nodes.FAILED_CREATE_STATES,
                    )
            except KeyboardInterrupt:
                raise Interrupted(
                    f"stopped waiting; {name} is still {doing} in {target.zone}"
                ) from None
    if json_out:
        render.print_json(node.to_json())
    elif not no_wait:
        render.out().print(f"{name}  {node.zone}  {node.state}", highlight=False)


def stop(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Node name.")],
    zone: Zone = None,
    project: Project = None,
    no_wait: NoWait = False,
    json_out: Json = False,
) -> None:
    """Stop a single-host TPU VM (it keeps its disk; multi-host slices cannot stop).

    Example: tpuctl stop my-tpu
    """
    _change(app_of(ctx), name, "stop", zone, project, no_wait, json_out)


def start(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Node name.")],
    zone: Zone = None,
    project: Project = None,
    no_wait: NoWait = False,
    json_out: Json = False,
) -> None:
    """Start a stopped TPU VM and wait until it is READY.

    Example: tpuctl start my-tpu
    """
    _change(app_of(ctx), name, "start", zone, project, no_wait, json_out)
