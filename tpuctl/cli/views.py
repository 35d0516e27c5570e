"""Nodes and queued resources as the CLI shows them: the list's columns and rows, a
node's description, and what create prints."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from tpuctl.agent.labels import expiry
from tpuctl.cli.render import Col, escape, human_age, info, new_table, out, print_json
from tpuctl.cloud import registry
from tpuctl.durations import format_duration
from tpuctl.models import (
    CREATED,
    IDLE_TIMEOUT,
    KEEP,
    LAST_ACTIVE,
    MAX_COST,
    Node,
    QueuedResource,
)
from tpuctl.services import cost
from tpuctl.timestamps import utc_clock

if TYPE_CHECKING:
    from rich.table import Table

    from tpuctl.config import Target


def expiry_column(labels: dict[str, str], now: float | None = None) -> str:
    """How long until the node deletes itself at its expiry: `12h30m`, `12h30m $50 cap`
    when its --max-cost is what ends it first, `expired`, `kept` (`tpuctl keep`), or `-`."""
    if labels.get(KEEP) == "true":  # never deleted at its expiry (tpuctl keep)
        return "kept"
    at, why = expiry(labels)
    if at is None:
        return "-"
    left = at - (time.time() if now is None else now)
    text = format_duration(left) if left > 0 else "expired"
    cents = labels.get(MAX_COST, "")
    if why.startswith("its max cost") and cents.isdigit():
        text += f" ${int(cents) / 100:g} cap"
    return text


def idle_column(node: Node, now: float | None = None, measured: float | None = None) -> str:
    """`12m/30m`: idle since the node was last active (else created), of its limit; `-`
    for a node without an idle limit nor activity recorded. `measured`: the TensorCores'
    idle duration from Cloud Monitoring, which wins over the labels."""
    limit = node.label_time(IDLE_TIMEOUT)
    if measured is not None:
        return human_age(measured) + (f"/{format_duration(limit)}" if limit is not None else "")
    since = node.label_time(LAST_ACTIVE)
    if since is None and limit is None:
        return "-"
    if since is None:
        since = node.label_time(CREATED)
    if since is None or node.state != "READY":
        return "-"
    idle = human_age(max(0.0, (time.time() if now is None else now) - since))
    return idle + (f"/{format_duration(limit)}" if limit is not None else "")


Measured = dict[str, tuple[str, float | None]]


def state_text(node: Node) -> str:
    """The node's state, with its host maintenance when one is announced: `READY (maint
    14:00)` before the window, `REPAIRING (maintenance until 14:30)` in it."""
    upcoming = node.maintenance
    if upcoming is None:
        return node.state
    if upcoming.ongoing:
        end = upcoming.window_end
        return f"{node.state} (maintenance" + (f" until {_clock(end)})" if end else ")")
    start = upcoming.window_start
    return f"{node.state} (maint {_clock(start)})" if start else f"{node.state} (maint)"


def _clock(at: float) -> str:
    return utc_clock(at).removesuffix(" UTC")


def maintenance_text(node: Node) -> str:
    """`scheduled, 2026-12-07 14:00-15:00 UTC, pending, can be rescheduled (...)`."""
    upcoming = node.maintenance
    if upcoming is None:
        return "none announced"
    text = upcoming.summary()
    if upcoming.can_reschedule and not upcoming.ongoing:
        text += f" (tpuctl maintain {node.name} --now starts it now)"
    return text


# On a narrow terminal the highest `drop` goes first; what tells of money (when the node
# goes, what it has cost, what it costs an hour) goes last.
NODE_COLUMNS = [
    Col("NAME", ident=True),
    Col("ZONE", ident=True),
    Col("ACCELERATOR"),
    Col("STATE"),
    Col("HEALTH", drop=7),
    Col("WORKERS", drop=10),
    Col("AGE", drop=6),
    Col("$/H", drop=3, right=True),
    Col("COST", drop=2, right=True),
    Col("OWNER", drop=9),
    Col("UTIL", drop=5, right=True),
    Col("IDLE", drop=8),
    Col("EXPIRES", drop=1),
]


API_COLUMN = Col("API", drop=4)  # tpu (the Cloud TPU API) or compute (Compute Engine)


def node_columns(with_api: bool = False) -> list[Col]:
    """The list's columns; with an API column after the accelerator when nodes of both
    APIs are listed."""
    return NODE_COLUMNS[:3] + [API_COLUMN] + NODE_COLUMNS[3:] if with_api else NODE_COLUMNS


def node_rows(
    nodes: list[Node], measured: Measured | None = None, with_api: bool = False
) -> list[list[str]]:
    """`measured`: by node name, the UTIL text and the idle seconds from Cloud Monitoring."""
    rows = []
    for n in nodes:
        util, idle = (measured or {}).get(n.full_name, ("-", None))
        rows.append(
            [
                n.name,
                n.zone,
                n.accelerator_type,
                *([n.api] if with_api else []),
                state_text(n),
                n.health or "-",
                str(len(n.workers)),
                human_age(n.age_seconds()),
                cost.money(cost.node_hourly(n)),
                cost.estimate(cost.so_far(n)),
                n.owner if n.owner else ("-" if n.managed else "(unmanaged)"),
                util,
                idle_column(n, measured=idle),
                expiry_column(n.labels),
            ]
        )
    return rows


def until_text(q: QueuedResource) -> str:
    """When a request gives up, as one kind of value whatever it was given as."""
    when = q.valid_until_time()
    return when.strftime("%Y-%m-%d %H:%M UTC") if when else "-"


QUEUED_COLUMNS = [
    Col("QUEUED", ident=True),
    Col("ZONE", ident=True),
    Col("ACCELERATOR"),
    Col("SCHEDULING", drop=3),
    Col("STATE"),
    Col("WAITED", drop=2),
    Col("VALID UNTIL", drop=4),
    Col("NOTE", fold=True),
]


def queued_rows(items: list[QueuedResource]) -> list[list[str]]:
    """Queued resources: what each waits for, how long it has waited, and its state."""
    rows = []
    for q in items:
        note = q.error if q.state == "FAILED" else ""
        if q.state == "ACTIVE":
            note = "node " + ", ".join(q.node_ids)
        rows.append(
            [
                q.name,
                q.zone,
                q.accelerator_type,
                q.scheduling,
                q.state,
                human_age(q.waited_seconds()),
                until_text(q),
                note,
            ]
        )
    return rows


def describe_node(node: Node) -> Table:
    table = new_table(box=None, show_header=False, pad_edge=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    rows = [
        ("name", node.name),
        ("project", node.project),
        ("zone", node.zone),
        ("accelerator", node.accelerator_type),
        ("runtime", node.runtime_version),
        ("state", node.state + (f" ({node.health})" if node.health else "")),
        ("scheduling", node.scheduling + (" reserved" if node.reserved else "")),
        ("created", node.create_time.isoformat() if node.create_time else "-"),
        ("age", human_age(node.age_seconds())),
        ("managed", "yes (tpuctl)" if node.managed else "no"),
        ("api", registry.kind(node.api).title),
        (
            "cost",
            f"{cost.money(cost.node_hourly(node), per_hour=True)} now, "
            f"{cost.estimate(cost.so_far(node))} since creation ({cost.note()})"
            if cost.node_hourly(node) is not None or not node.slice.known
            else str(cost.unpriced([node.slice.generation])),
        ),
    ]
    if node.topology:
        rows.append(("topology", f"{node.topology} (the slice's interconnect)"))
    if node.maintenance:
        rows.append(("maintenance", maintenance_text(node)))
    expires, why = expiry(node.labels)
    if expires is not None:
        left = expires - time.time()
        kind = registry.kind(node.api)  # Compute Engine ends it itself (maxRunDuration)
        who = late = f"{kind.title} deletes it"
        if not kind.ends_at_expiry:
            who, late = "it deletes itself", "its watchdog or gc deletes it"
        rows.append(
            (
                "expires",
                f"in {format_duration(left)}, at {utc_clock(expires)} ({why}): {who}"
                if left > 0
                else f"{format_duration(-left)} ago ({why}): {late}",
            )
        )
    limit = node.label_time(IDLE_TIMEOUT)
    if limit is not None:
        rows.append(
            (
                "idle",
                f"{idle_column(node)} (idle for / limit: its watchdog deletes or stops it "
                "at the limit)",
            )
        )
    if node.description:
        rows.append(("description", node.description))
    if node.health_description:
        rows.append(("health detail", node.health_description))
    for key, value in sorted(node.labels.items()):
        rows.append((f"label {key}", value))
    for w in node.workers:
        rows.append(
            (
                f"worker {w.index}",
                w.internal_ip + (f"  external {w.external_ip}" if w.external_ip else ""),
            )
        )
    for key, value in rows:
        table.add_row(key, escape(str(value)))
    return table


# -- nodes as create shows them ---------------------------------------------------------
def started(json_out: bool, data: dict[str, Any], message: str) -> None:
    """--no-wait: the request is made; say what to do next (or the JSON of it)."""
    if json_out:
        print_json(data)
    else:
        info(message)


def show_node(node: Node, json_out: bool) -> None:
    if json_out:
        print_json(node.to_json())
        return
    console = out()
    console.print(
        f"{node.name}  {node.zone}  {node.accelerator_type}  {node.state}",
        highlight=False,
        markup=False,
    )
    for w in node.workers:
        console.print(
            f"  worker {w.index}: {w.external_ip or '-'} (internal {w.internal_ip})",
            highlight=False,
            markup=False,
        )


def show_slices(name: str, target: Target, slices: list[Node], json_out: bool) -> None:
    """A multislice request: its slices, in order (each a node of its own)."""
    if json_out:
        print_json(
            {
                "kind": "queuedResource",
                "name": name,
                "zone": target.zone,
                "slices": [n.to_json() for n in slices],
            }
        )
        return
    info(
        f"{registry.request_called(slices[0]) if slices else 'queued resource'} {name}: "
        f"{len(slices)} slices; `tpuctl delete {name} --zone "
        f"{target.zone}` deletes them all"
    )
    for node in slices:
        show_node(node, json_out)
