"""tpuctl delete NAME..."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated

from tpuctl.cli import complete, declare, render
from tpuctl.cli.options import Json, NoWait, Project, Zone, app_of
from tpuctl.cloud import registry
from tpuctl.errors import DeleteFailed, Interrupted, NotFoundError, UsageError

if TYPE_CHECKING:
    from tpuctl.services.deletion import Doomed


def delete(
    ctx: declare.Context,
    names: Annotated[
        list[str],
        declare.Argument(help="One or more node names.", autocompletion=complete.node_names),
    ],
    zone: Zone = None,
    project: Project = None,
    yes: Annotated[
        bool, declare.Option("--yes", "-y", help="Do not ask for confirmation.")
    ] = False,
    missing_ok: Annotated[
        bool, declare.Option("--missing-ok", help="A node that does not exist is not an error.")
    ] = False,
    no_wait: NoWait = False,
    json_out: Json = False,
) -> None:
    """Delete TPU VMs (concurrently), after confirmation.

    Example: tpuctl delete my-tpu other-tpu --yes

    A queued resource of that name goes too, with its node (a forced delete).
    """
    from tpuctl.services import deletion
    from tpuctl.services.names import validate_name

    for name in names:
        validate_name(name)
    app = app_of(ctx)
    target = app.target(project, zone)
    backends = app.backends()  # a name the first has not is looked up on the others
    # --missing-ok: a cleanup of that zone, which never reaches for a node elsewhere
    doomed = deletion.resolve(backends, target, names, render.info, elsewhere=not missing_ok)
    if missing_ok:
        for name in doomed.missing:
            render.info(f"{name}: not found in zone {target.zone} (--missing-ok)")

    if (doomed.nodes or doomed.requests) and not yes:
        _confirm(doomed, app.stdin_isatty)
    asked: list[str] = []  # what the cloud has a delete of: it goes on there regardless
    try:
        with render.progress("deleting:") as update:
            results = deletion.delete(
                backends,
                doomed,
                wait=not no_wait,
                progress=lambda name, state, elapsed: update(f"{name} {state}", elapsed),
                asked=asked.append,
                say=render.info,
            )
    except KeyboardInterrupt:
        raise _interrupted(doomed, asked, target.zone) from None
    if json_out:
        render.print_json(
            [{"name": r.name, "deleted": r.ok, "message": r.message} for r in results]
            + [{"name": m, "deleted": False, "message": "not found"} for m in doomed.missing]
        )
    else:
        for r in results:
            render.out().print(f"{r.name}: {r.message}", highlight=False, markup=False)
    failed = [r for r in results if not r.ok]
    if failed:
        raise DeleteFailed(
            "could not delete " + ", ".join(f"{r.name} ({r.message})" for r in failed),
            hint="these nodes may still be billing; run the delete again",
        )
    if doomed.missing and not missing_ok:
        raise NotFoundError(
            f"{', '.join(doomed.missing)}: not found in zone {target.zone}",
            hint="`tpuctl list --all-zones` shows your nodes; --missing-ok ignores names "
            "that do not exist",
        )


GRACE = 5.0  # seconds a first signal waits for the delete calls not yet made


def _interrupted(doomed: Doomed, asked: list[str], zone: str) -> Interrupted:
    """A signal while deleting: leave at once, saying the cloud goes on with what it was
    asked; the delete calls not yet made get GRACE seconds (a second signal: none)."""
    left = [n for n in doomed.names if n not in asked]
    if left:
        render.info(
            f"interrupted: waiting up to {GRACE:.0f} s for the delete of {', '.join(left)} "
            "to reach the cloud (Ctrl-C again to leave now)"
        )
        try:
            deadline = time.monotonic() + GRACE
            while time.monotonic() < deadline and any(n not in asked for n in left):
                time.sleep(0.05)
        except KeyboardInterrupt:
            pass
        left = [n for n in doomed.names if n not in asked]
    check = f"`tpuctl list --zone {zone}` shows what is left"
    going = [n for n in doomed.names if n in asked]
    message = "interrupted"
    if going:
        message += f"; the cloud goes on deleting {', '.join(going)}"
    if left:
        message += f"; {', '.join(left)} may not have been asked to go and may still be billing"
    hint = check + (
        f"; delete the rest with `tpuctl delete {' '.join(left)} --zone {zone} --yes`"
        if left
        else ""
    )
    return Interrupted(message, hint=hint)


def _confirm(doomed: Doomed, tty: bool) -> None:
    """Go on only when a person at a terminal says yes to the list."""
    if not tty:
        raise UsageError(
            "refusing to delete without confirmation: stdin is not a terminal",
            hint="pass --yes to delete " + " ".join(doomed.names),
        )
    for n in doomed.nodes:
        render.info(f"  {n.name}  {n.accelerator_type}  {n.state}  {n.zone}")
    for q in doomed.requests:
        render.info(
            f"  {q.name}  {q.accelerator_type}  {registry.request_called(q)} {q.state}  {q.zone}"
            + (f"  (with node {', '.join(q.node_ids)})" if q.state == "ACTIVE" else "")
        )
    if not render.confirm(f"Delete {_what(doomed)}?", default=False):
        render.info("nothing deleted")
        raise declare.Exit(1)


def _what(doomed: Doomed) -> str:
    """`node a`, `2 nodes`, `1 node and 1 queued request`..."""
    parts = []
    for count, noun in ((len(doomed.nodes), "node"), (len(doomed.requests), "queued request")):
        if count:
            parts.append(f"{count} {noun}{'s' if count > 1 else ''}")
    if parts == ["1 node"]:
        return f"node {doomed.nodes[0].name}"
    return " and ".join(parts)
