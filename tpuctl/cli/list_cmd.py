"""tpuctl list"""

from __future__ import annotations

from typing import Annotated, Any

from tpuctl.cli import declare, render, views
from tpuctl.cli.options import Filter, Format, Json, Limit, Project, SortBy, Wide, Zone, app_of
from tpuctl.cloud import registry
from tpuctl.errors import TpuctlError


def list_nodes(
    ctx: declare.Context,
    zone: Zone = None,
    project: Project = None,
    all_zones: Annotated[
        bool, declare.Option("--all-zones", help="Every zone, in one call.")
    ] = False,
    json_out: Json = False,
    wide: Wide = False,
    fmt: Format = None,
    filter_text: Filter = None,
    sort_by: SortBy = None,
    limit: Limit = None,
) -> None:
    """List TPU VMs and queued requests, in a zone or every zone.

    Example: tpuctl list --filter 'state=READY' --format 'value(name,zone)'

    With --json: one array; each entry has "kind": "node" or "queuedResource". --filter
    and --sort-by take the keys of those entries.
    """
    app = app_of(ctx)
    target = app.target(project, None if all_zones else zone, need_zone=False)
    zone_part = "-" if all_zones else target.zone
    parent = f"projects/{target.project}/locations/{zone_part}"
    from concurrent.futures import ThreadPoolExecutor

    from tpuctl.services import metrics, prices

    prices.prefetch()  # the price catalog is read while the nodes are
    backends = app.backends()
    tpu = registry.requests_api(backends)  # its errors are the command's
    with ThreadPoolExecutor(max_workers=1) as pool:
        # the queued requests, the node lists of both APIs and Cloud Monitoring's UTIL and
        # IDLE, all read at once: the list costs one round trip, not five
        requests = pool.submit(tpu.list_queued_resources, parent)
        shot = metrics.snapshot(backends, app.factory.monitoring, target.project, zone_part)
        try:
            queued = sorted(requests.result(), key=lambda q: (q.zone, q.name))
        except TpuctlError as e:  # the nodes are still worth showing
            queued = []
            shot.skipped.append(f"could not list queued resources: {e}")
    for other in (b for b in backends if b is not tpu):  # requests made of nodes (multislices)
        mine = [r.node for r in shot.rows if registry.holder(backends, r.node) is other]
        queued += other.requests_of(mine)
    queued.sort(key=lambda q: (q.zone, q.name))
    for line in shot.skipped:
        render.info(line)
    rows = {r.node.full_name: r for r in shot.rows}
    nodes = sorted((r.node for r in shot.rows), key=lambda n: (n.zone, n.name))
    from tpuctl.cli.projection import chosen
    from tpuctl.services import cost

    entries: list[tuple[Any, dict[str, Any]]] = [
        (
            n,
            {
                **n.to_json(),
                "kind": "node",
                "queuedResource": n.queued_resource or None,
                "hourlyUsd": cost.node_hourly(n),
                "costSoFarUsd": cost.so_far(n),
                "utilization": rows[n.full_name].util,
                "idleSeconds": rows[n.full_name].idle_seconds,
            },
        )
        for n in nodes
    ] + [(q, q.to_json()) for q in queued]
    picked = [entries[i] for i in chosen([e for _, e in entries], filter_text, sort_by, limit)]
    if fmt:
        render.print_format([e for _, e in picked], fmt)
        return
    if json_out:
        render.print_json([e for _, e in picked])
        return
    nodes = [x for x, e in picked if e["kind"] == "node"]
    queued = [x for x, e in picked if e["kind"] != "node"]
    if not nodes and not queued:
        where = "any zone" if zone_part == "-" else f"zone {zone_part}"
        matching = " that --filter matches" if entries and filter_text else ""
        render.info(f"no TPU nodes{matching} in {where} of project {target.project}")
        return
    if nodes:
        measured = {
            name: ("-" if r.util is None else f"{r.util:.0f}%", r.idle_seconds)
            for name, r in rows.items()
        }
        # an API column once a node is not on the preferred API
        both = bool({n.api for n in nodes} - {registry.preferred().key})
        render.show_fitted(views.node_columns(both), views.node_rows(nodes, measured, both), wide)
    if queued:
        if nodes:
            render.out().print()
        render.show_fitted(views.QUEUED_COLUMNS, views.queued_rows(queued), wide)
    if nodes:
        render.info(f"costs: {cost.note()}")
        if missing := cost.unpriced(n.slice.generation for n in nodes):
            render.info(missing)
