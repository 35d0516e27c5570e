"""tpuctl gc: delete tpuctl's expired, idle and preempted nodes (meant for cron)."""

from __future__ import annotations

from typing import Annotated

import typer

from tpuctl.cli import render
from tpuctl.cli.options import Json, Project, Zone, app_of
from tpuctl.errors import GcFailed, TpuctlError, UsageError


def gc(
    ctx: typer.Context,
    idle: Annotated[
        str | None,
        typer.Option(
            "--idle", help="Also delete nodes idle this long (e.g. 30m); confirmed on the node."
        ),
    ] = None,
    zone: Zone = None,
    all_zones: Annotated[
        bool, typer.Option("--all-zones", help="Every zone (the default).")
    ] = False,
    project: Project = None,
    owner: Annotated[str | None, typer.Option("--owner", help="Nodes of this owner.")] = None,
    all_owners: Annotated[bool, typer.Option("--all-owners", help="Everyone's nodes.")] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would go; delete nothing.")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Delete without asking (cron).")] = False,
    json_out: Json = False,
) -> None:
    """Delete nodes tpuctl manages that are expired, idle or preempted; never anything else.

    Example: tpuctl gc --dry-run      (cron: */10 * * * * tpuctl gc --yes --idle 1h)
    """
    from tpuctl.config import state_dir
    from tpuctl.durations import parse_duration
    from tpuctl.services import cost
    from tpuctl.services import gc as gc_service
    from tpuctl.services import idle as idle_service
    from tpuctl.services.nodes import local_user

    if owner and all_owners:
        raise UsageError("--owner and --all-owners are exclusive: choose one")
    if zone and all_zones:
        raise UsageError("--zone and --all-zones are exclusive: choose one")
    idle_limit = parse_duration(idle, "--idle") if idle else None
    app = app_of(ctx)
    # gc looks everywhere unless told a zone: a forgotten node in another zone is the
    # expensive case. Only --zone narrows it (config defaults do not).
    target = app.target(project, None, need_zone=False)
    parent = f"projects/{target.project}/locations/{zone or '-'}"
    api = app.tpu()
    who = None if all_owners else (owner or local_user())
    # A node whose labels say idle is looked at over SSH before it counts as idle.
    probe = idle_service.ssh_probe(api, app.factory.ssh())
    decisions = gc_service.plan(
        api.list_nodes(parent), owner=who, idle_limit=idle_limit, probe=probe
    )
    doomed = [d for d in decisions if d.delete]
    # Requests that can never give a node any more (and hold their place in the queue).
    stale = gc_service.stale_queued(api.list_queued_resources(parent), owner=who)

    def qr_line(q: gc_service.QueuedDecision, verb: str) -> str:
        return f"{verb} queued resource {q.request.name} ({q.request.zone}): {q.reason}"

    def line(d: gc_service.Decision, verb: str) -> str:
        return (
            f"{verb} {d.node.name} ({d.node.zone}, {d.node.accelerator_type}): {d.reason}; "
            f"stops {cost.money(d.hourly, per_hour=True)}"
        )

    if not json_out:
        for d in decisions:
            if not d.delete:
                render.info(f"keep {d.node.name} ({d.node.zone}): {d.reason}")
    if not doomed and not stale:
        if json_out:
            render.print_json(_json(decisions, {}))
        else:
            render.info("nothing to collect")
        return
    total = len(doomed) + len(stale)
    if dry_run or not yes:
        for d in doomed:
            render.info(line(d, "would delete"))
        for q in stale:
            render.info(qr_line(q, "would delete"))
        if dry_run:
            if json_out:
                render.print_json(_json(decisions, {}))
            return
        if not app.stdin_isatty:
            raise UsageError(
                f"deleting nothing: {total} resource(s) to collect but no --yes and no terminal",
                hint="a cron line must say `tpuctl gc --yes`; use --dry-run to only look",
            )
        if not typer.confirm(f"Delete {total} resource(s)?", default=False, err=True):
            render.info("nothing deleted")
            raise typer.Exit(1)

    with render.progress("collecting:") as update:
        results = gc_service.collect(
            api, doomed, progress=lambda name, state, elapsed: update(f"{name} {state}", elapsed)
        )
    log = state_dir() / "gc.log"
    outcome = {}
    for d, r in zip(doomed, results, strict=True):
        outcome[d.node.name] = r
        gc_service.audit(log, d, r.message if r.ok else f"failed: {r.message}", target.project)
        if not json_out:
            render.out().print(line(d, "deleted" if r.ok else "FAILED to delete"), highlight=False)
    failed_requests = []
    for q in stale:
        from tpuctl.services import queued

        try:
            queued.delete_request(api, q.request.full_name)
            result = "deleted"
        except TpuctlError as e:
            result = f"failed: {e}"
            failed_requests.append(q.request.name)
        gc_service.audit_entry(
            log,
            target.project,
            "queuedResource",
            q.request.name,
            q.request.zone,
            q.request.accelerator_type,
            q.reason,
            None,
            result,
        )
        if not json_out:
            verb = "deleted" if result == "deleted" else "FAILED to delete"
            render.out().print(qr_line(q, verb), highlight=False)
    if json_out:
        render.print_json(
            _json(decisions, outcome)
            + [
                {
                    "name": q.request.name,
                    "zone": q.request.zone,
                    "kind": "queuedResource",
                    "reason": q.reason,
                    "action": "delete",
                    "deleted": q.request.name not in failed_requests,
                }
                for q in stale
            ]
        )
    failed = [f"{r.name} ({r.message})" for r in results if not r.ok]
    failed += [f"queued resource {name}" for name in failed_requests]
    if failed:
        raise GcFailed(
            "could not delete " + ", ".join(failed),
            hint="these may still be billing or queued; run `tpuctl gc` again or delete them "
            "by hand",
        )


def _json(decisions: list, outcome: dict) -> list[dict]:  # type: ignore[type-arg]
    from tpuctl.services import cost

    rows = []
    for d in decisions:
        r = outcome.get(d.node.name)
        rows.append(
            {
                "name": d.node.name,
                "zone": d.node.zone,
                "accelerator": d.node.accelerator_type,
                "reason": d.reason,
                "action": "delete" if d.delete else "keep",
                "deleted": bool(r and r.ok),
                "result": (r.message if r else None),
                "hourlyUsd": d.hourly,
                "note": cost.NOTE,
            }
        )
    return rows
