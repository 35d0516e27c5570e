"""tpuctl delete NAME..."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Annotated

import typer

from tpuctl.cli import render
from tpuctl.cli.options import Json, NoWait, Project, Zone, app_of
from tpuctl.errors import DeleteFailed, NotFoundError, UsageError
from tpuctl.models import Node, QueuedResource


def delete(
    ctx: typer.Context,
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

    A queued resource of that name goes too, with its node (a forced delete).
    """
    from tpuctl.services import nodes, queued

    for name in names:
        nodes.validate_name(name)
    app = app_of(ctx)
    target = app.target(project, zone)
    api = app.tpu()

    found, missing = [], []
    requests: dict[str, QueuedResource] = {}  # a queued resource takes its nodes with it
    for name in dict.fromkeys(names):
        node: Node | None = None
        request: QueuedResource | None = None
        with contextlib.suppress(NotFoundError):
            node = api.get_node(f"{target.parent}/nodes/{name}")
        owner = (node.raw.get("queuedResource") if node else None) or queued.qr_name(target, name)
        with contextlib.suppress(NotFoundError):
            request = api.get_queued_resource(owner)
        if request is not None:
            requests[request.full_name] = request
        if node is not None and (request is None or node.name not in request.node_ids):
            found.append(node)
        if node is None and request is None:
            missing.append(name)
    for name in missing:
        render.info(f"{name}: not found in zone {target.zone}")

    if (found or requests) and not yes:
        if not app.stdin_isatty:
            everything = [n.name for n in found] + [q.name for q in requests.values()]
            raise UsageError(
                "refusing to delete without confirmation: stdin is not a terminal",
                hint="pass --yes to delete " + " ".join(dict.fromkeys(everything)),
            )
        for n in found:
            render.info(f"  {n.name}  {n.accelerator_type}  {n.state}  {n.zone}")
        for q in requests.values():
            render.info(
                f"  {q.name}  {q.accelerator_type}  queued resource {q.state}  {q.zone}"
                + (f"  (with node {', '.join(q.node_ids)})" if q.state == "ACTIVE" else "")
            )
        count = len(found) + len(requests)
        if not typer.confirm(f"Delete {count} node(s) and request(s)?", default=False, err=True):
            render.info("nothing deleted")
            raise typer.Exit(1)

    with render.progress("deleting:") as update:

        def report(name: str) -> Callable[[str, float], None]:
            return lambda state, elapsed: update(f"{name} {state}", elapsed)

        results = [
            queued.delete_queued(api, q, wait=not no_wait, progress=report(q.name))
            for q in requests.values()
        ]
        results += nodes.delete_nodes(
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
