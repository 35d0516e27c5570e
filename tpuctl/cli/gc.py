"""tpuctl gc: delete tpuctl's expired, idle and preempted nodes (meant for cron)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated, Any

from tpuctl import wording
from tpuctl.cli import declare, render
from tpuctl.cli.options import Json, Project, Zone, app_of
from tpuctl.errors import GcFailed, UsageError

if TYPE_CHECKING:
    from tpuctl.models import DeleteResult
    from tpuctl.services.gc import Collected, Decision, Plan, QueuedDecision
    from tpuctl.services.names import Owner


def gc(
    ctx: declare.Context,
    idle: Annotated[
        str | None,
        declare.Option(
            "--idle", help="Also delete nodes idle this long (e.g. 30m); confirmed on the node."
        ),
    ] = None,
    zone: Zone = None,
    all_zones: Annotated[
        bool, declare.Option("--all-zones", help="Every zone (the default).")
    ] = False,
    project: Project = None,
    owner: Annotated[
        str | None,
        declare.Option(
            "--owner",
            help="Nodes of this owner: an account's email, or its tpuctl-owner label.",
        ),
    ] = None,
    all_owners: Annotated[bool, declare.Option("--all-owners", help="Everyone's nodes.")] = False,
    envs_unused: Annotated[
        str | None,
        declare.Option(
            "--envs-unused",
            help="Also delete the cached environments (tpuctl/envs/ in the bucket) no job "
            "used for this long (e.g. 30d).",
        ),
    ] = None,
    bucket: Annotated[
        str | None,
        declare.Option("--bucket", help="With --envs-unused: gs://BUCKET (default: run's)."),
    ] = None,
    dry_run: Annotated[
        bool, declare.Option("--dry-run", help="Show what would go; delete nothing.")
    ] = False,
    yes: Annotated[
        bool, declare.Option("--yes", "-y", help="Delete without asking (cron).")
    ] = False,
    json_out: Json = False,
) -> None:
    """Delete expired, idle or preempted nodes that tpuctl made.

    Only nodes labelled managed-by=tpuctl, by default only your account's (the
    tpuctl-owner label). Labels keep gc from deleting by accident, not from someone who may
    write them: anyone who may create nodes in the project may set any label.

    Example: tpuctl gc --dry-run      (cron: */10 * * * * tpuctl gc --yes --idle 1h)
    """
    from tpuctl.config import state_dir
    from tpuctl.durations import parse_duration
    from tpuctl.services import gc as gc_service
    from tpuctl.services import leftovers as left
    from tpuctl.services import metrics as metrics_service

    if owner and all_owners:
        raise UsageError("--owner and --all-owners are exclusive: choose one")
    if zone and all_zones:
        raise UsageError("--zone and --all-zones are exclusive: choose one")
    idle_limit = parse_duration(idle, "--idle") if idle else None
    unused_for = parse_duration(envs_unused, "--envs-unused") if envs_unused else None
    if bucket and unused_for is None:
        raise UsageError("--bucket names where the environments are: it needs --envs-unused")
    app = app_of(ctx)
    whose = None if all_owners else _owner(owner, app)  # a bad --owner before any call
    # gc looks everywhere unless told a zone: a forgotten node in another zone is the
    # expensive case. Only --zone narrows it (config defaults do not).
    # A --zone given is checked like any other (its shape, a known zone, not empty).
    target = app.target(project, zone, need_zone=False)
    if unused_for is not None:
        _prune_envs(app, target.project, bucket, unused_for, dry_run=dry_run, yes=yes)
    backends = app.backends()  # every TPU API's nodes (and what unfinished creates left)

    def load_metrics(project: str) -> metrics_service.Seen:
        seen, why_not = metrics_service.safe_read(
            app.factory.monitoring, project, [zone] if zone else None, history=False
        )
        if why_not:
            render.info(f"no metrics ({why_not}): idleness is probed over SSH")
        return seen

    found = gc_service.plan(
        backends,
        f"projects/{target.project}/locations/{zone or '-'}",
        owner=whose,
        idle_limit=idle_limit,
        # Cloud Monitoring first; where its metrics are missing or old, a node whose labels
        # say idle is looked at over SSH before it counts as idle.
        metrics=metrics_service.idle_check(load_metrics, backends),
        probe=left.probe_by_api(backends, app.factory.ssh),
    )
    for why in found.skipped:
        render.info(why)
    _show_plan(found, json_out=json_out, listing=dry_run or not yes, dry_run=dry_run)
    if not found.total or dry_run:
        return
    if not yes:
        _confirm(found.total, app.stdin_isatty)
    with render.progress("collecting:") as update:
        done = gc_service.collect(
            backends,
            found,
            project=target.project,
            log=state_dir() / "gc.log",
            progress=lambda name, state, elapsed: update(f"{name} {state}", elapsed),
        )
    _show_results(found, done, json_out)
    if done.failed:
        raise GcFailed(
            "could not delete " + ", ".join(done.failed),
            hint="these may still be billing or queued; run `tpuctl gc` again or delete them "
            "by hand",
        )


def _owner(given: str | None, app: Any) -> Owner:
    """Whose nodes gc looks at: `--owner` (an account's email, or a tpuctl-owner label as
    it is on the nodes), else the account tpuctl acts as."""
    from tpuctl.services.names import Owner

    if given:
        return Owner.of(given)
    return Owner.of(app.factory.required_account("gc (whose nodes to collect)"))


def _prune_envs(
    app: Any, project: str, flag: str | None, unused_for: int, *, dry_run: bool, yes: bool
) -> None:
    """The cached environments no job used for `unused_for` seconds: listed, then (with
    --yes, or confirmed) deleted. Said on stderr: --json stays the nodes' table. The
    bucket is checked as `tpuctl jobs` checks it (a default bucket another project owns
    is refused)."""
    from tpuctl.cli.jobs import job_bucket
    from tpuctl.services import env_gc

    bucket = job_bucket(app, project, flag)
    name = bucket.name
    doomed = env_gc.plan(bucket, unused_for)
    if not doomed:
        render.info(f"environments: none unused for {unused_for // 86400 or 1} day(s) or more")
        return
    for entry in doomed:
        days = (time.time() - entry.last_used) / 86400
        verb = "would delete" if dry_run or not yes else "deleting"
        render.info(
            f"{verb} environment {entry.key[:12]} ({len(entry.objects)} objects, "
            f"{wording.size(entry.size)}): unused for {days:.1f} days"
        )
    if dry_run:
        return
    if not yes:
        _confirm(len(doomed), app.stdin_isatty)
    for entry in doomed:
        env_gc.prune(bucket, entry)
    render.info(f"deleted {len(doomed)} environment(s) from gs://{name}/tpuctl/envs/")


def _show_plan(found: Plan, *, json_out: bool, listing: bool, dry_run: bool) -> None:
    """What gc keeps and why; with `listing`, what it would delete (before it asks)."""
    if not json_out:
        for d in found.decisions:
            if not d.delete:
                render.info(f"keep {d.node.name} ({d.node.zone}): {d.reason}")
        for lo in found.leftovers:
            if not lo.delete:
                render.info(f"keep {lo.label}: {lo.reason}")
    if not found.total:
        if json_out:
            render.print_json(_json(found.decisions, {}) + _leftovers_json(found, None))
        else:
            render.info("nothing to collect")
        return
    if listing:
        for d in found.doomed:
            render.info(_line(d, "would delete"))
        for q in found.stale:
            render.info(_request_line(q, "would delete"))
        for lo in found.doomed_leftovers:
            render.info(f"would delete {lo.label}: {lo.reason}")
    if dry_run and json_out:
        render.print_json(_json(found.decisions, {}) + _leftovers_json(found, None))


def _show_results(found: Plan, done: Collected, json_out: bool) -> None:
    """One line (or JSON row) per resource gc set out to delete, with how it went."""
    if json_out:
        render.print_json(
            _json(found.decisions, {d.node.name: r for d, r in done.nodes})
            + [
                {
                    "name": q.request.name,
                    "zone": q.request.zone,
                    "kind": "queuedResource",
                    "reason": q.reason,
                    "action": "delete",
                    "deleted": error is None,
                }
                for q, error in done.requests
            ]
            + _leftovers_json(found, done)
        )
    else:
        for d, r in done.nodes:
            if r.skipped:
                render.out().print(
                    f"skipped {d.node.name} ({d.node.zone}): {r.message}",
                    highlight=False,
                    markup=False,
                )
                continue
            verb = "deleted" if r.ok else "FAILED to delete"
            render.out().print(_line(d, verb), highlight=False, markup=False)
        for q, error in done.requests:
            verb = "deleted" if error is None else "FAILED to delete"
            render.out().print(_request_line(q, verb), highlight=False, markup=False)
        for lo, result in done.leftovers:
            verb = result.split(":", 1)[0].replace("failed", "FAILED to delete")
            why = result.split(":", 1)[1].strip() if ":" in result else lo.reason
            render.out().print(f"{verb} {lo.label}: {why}", highlight=False, markup=False)


def _confirm(total: int, tty: bool) -> None:
    """Go on only when a person at a terminal says yes; a cron line must say --yes."""
    if not tty:
        raise UsageError(
            f"deleting nothing: {total} resource(s) to collect but no --yes and no terminal",
            hint="a cron line must say `tpuctl gc --yes`; use --dry-run to only look",
        )
    if not render.confirm(f"Delete {total} resource(s)?", default=False):
        render.info("nothing deleted")
        raise declare.Exit(1)


def _line(d: Decision, verb: str) -> str:
    from tpuctl.services import cost

    return f"{verb} {d.node.name} ({d.node.zone}, {d.node.accelerator_type}): {d.reason}" + (
        f"; stops {cost.money(d.hourly, per_hour=True)}"
        if d.hourly is not None
        else "; its price is not known"
    )


def _request_line(q: QueuedDecision, verb: str) -> str:
    return f"{verb} queued resource {q.request.name} ({q.request.zone}): {q.reason}"


def _leftovers_json(found: Plan, done: Collected | None) -> list[dict[str, Any]]:
    from tpuctl.services import leftovers as left

    results = {id(d): r for d, r in done.leftovers} if done else {}
    return [left.to_json(d, results.get(id(d))) for d in found.leftovers]


def _json(decisions: list[Decision], outcome: dict[str, DeleteResult]) -> list[dict[str, Any]]:
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
                "deleted": bool(r and r.ok and not r.skipped),
                "result": (r.message if r else None),
                "hourlyUsd": d.hourly,
                "note": cost.note(),
                "evidence": d.evidence,
            }
        )
    return rows
