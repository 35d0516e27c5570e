"""tpuctl delete NAME..."""

from __future__ import annotations

from typing import Annotated

import typer

from tpuctl.cli import render
from tpuctl.cli.options import Json, NoWait, Project, Zone, env
from tpuctl.errors import NotFoundError, TpuctlError, UsageError


class DeleteFailed(TpuctlError):
    pass


def delete(
    names: Annotated[list[str], typer.Argument(help="One or more node names.")],
    zone: Zone = None,
    project: Project = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    missing_ok: Annotated[
        bool, typer.Option("--missing-ok", help="A node that does not exist is not an error.")
    ] = False,
    no_wait: NoWait = False,
    json_out: Json = False,
) -> None:
    """Delete TPU VMs (concurrently), after confirmation.

    Example: tpuctl delete my-tpu other-tpu --yes
    """
    from tpuctl.services import nodes

    for name in names:
        nodes.validate_name(name)
    app = env()
    target = app.target(project, zone)
    api = app.tpu()

    found, missing = [], []
    for name in dict.fromkeys(names):
        try:
            found.append(api.get_node(f"{target.parent}/nodes/{name}"))
        except NotFoundError:
            missing.append(name)
    for name in missing:
        render.info(f"{name}: not found in zone {target.zone}")

    if found and not yes:
        if not app.stdin_isatty:
            raise UsageError(
                "refusing to delete without confirmation: stdin is not a terminal",
                hint="pass --yes to delete " + " ".join(n.name for n in found),
            )
        for n in found:
            render.info(f"  {n.name}  {n.accelerator_type}  {n.state}  {n.zone}")
        if not typer.confirm(f"Delete {len(found)} node(s)?", default=False, err=True):
            render.info("nothing deleted")
            raise typer.Exit(1)

    with render.progress("deleting:") as update:
        results = nodes.delete_nodes(
            api,
            found,
            wait=not no_wait,
            progress=lambda name, state, elapsed: update(f"{name} {state}", elapsed),
        )
    if json_out:
        render.print_json(
            [{"name": r.name, "deleted": r.ok, "message": r.message} for r in results]
            + [{"name": m, "deleted": False, "message": "not found"} for m in missing]
        )
    else:
        for r in results:
            render.out().print(f"{r.name}: {r.message}", highlight=False)
    failed = [r for r in results if not r.ok]
    if failed:
        raise DeleteFailed(
            "could not delete " + ", ".join(f"{r.name} ({r.message})" for r in failed),
            hint="these nodes may still be billing; run the delete again",
        )
    if missing and not missing_ok:
        raise NotFoundError(
            f"not found in zone {target.zone}: {', '.join(missing)}",
            hint="pass --missing-ok to ignore nodes that do not exist",
        )
