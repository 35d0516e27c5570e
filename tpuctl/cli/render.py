"""Output: data on stdout (tables or JSON), progress and messages on stderr."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import typer

from tpuctl.agent.labels import expiry
from tpuctl.cloud import registry
from tpuctl.durations import format_duration
from tpuctl.models import CREATED, IDLE_TIMEOUT, LAST_ACTIVE, MAX_COST, Node, QueuedResource
from tpuctl.services import cost
from tpuctl.timestamps import utc_clock

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from tpuctl.config import Target

# rich is imported when something is printed, not when tpuctl starts (`--help` stays fast).


def escape(text: str) -> str:
    """`text` with rich's markup characters escaped."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def _table(**options: Any) -> Table:
    from rich.table import Table

    return Table(**options)


def _styles() -> Literal["auto"] | None:
    """Rich's colour system; None (no escape sequence at all, bold included) under NO_COLOR
    (https://no-color.org: set and not empty). Without a terminal rich writes none anyway."""
    return None if os.environ.get("NO_COLOR") else "auto"


def out() -> Console:
    # Piped output is for grep and scripts: never truncate a table to 80 columns there.
    from rich.console import Console

    return Console(
        file=sys.stdout,
        soft_wrap=True,
        width=None if sys.stdout.isatty() else 400,
        color_system=_styles(),
    )


def err() -> Console:
    from rich.console import Console

    return Console(file=sys.stderr, soft_wrap=True, color_system=_styles())


_TRAILING = re.compile(r" +((?:\x1b\[[0-9;]*m)*)$", re.M)


def show(renderable: Any, console: Console | None = None) -> None:
    """Print a table (or any rich renderable) without the spaces rich pads lines with."""
    console = console or out()
    with console.capture() as captured:
        console.print(renderable)
    console.file.write(_TRAILING.sub(r"\1", captured.get()))
    console.file.flush()


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    sys.stdout.flush()


def info(message: str) -> None:
    err().print(escape(message), highlight=False)


def confirm(question: str, default: bool) -> bool:
    """A yes/no question, all of it on stderr, the answer read from stdin.

    Not `typer.confirm(err=True)`: click writes the prompt's last character with
    `input()`, which goes to stdout, so a stdout redirected to a file or a pipe (`--json`,
    a plan kept by `tpuctl gc > plan.txt`) would get a stray space. Ctrl-C or the end of
    stdin aborts, as click's does."""
    suffix = " [Y/n]: " if default else " [y/N]: "
    while True:
        sys.stderr.write(question + suffix)
        sys.stderr.flush()
        try:
            line = sys.stdin.readline()
        except KeyboardInterrupt:
            raise typer.Abort() from None
        if not line:
            raise typer.Abort()
        answer = line.strip().lower()
        if answer in ("y", "yes"):
            return True
        if answer in ("n", "no"):
            return False
        if not answer:
            return default
        sys.stderr.write("Error: invalid input\n")


def human_age(seconds: float | None) -> str:
    return "-" if seconds is None else format_duration(seconds)


def expiry_column(labels: dict[str, str], now: float | None = None) -> str:
    """How long until the node deletes itself at its expiry: `12h30m`, `12h30m $50 cap`
    when its --max-cost is what ends it first, `expired`, or `-`."""
    at, why = expiry(labels)
    if at is None:
        return "-"
    left = at - (time.time() if now is None else now)
    text = format_duration(left) if left > 0 else "expired"
    cents = labels.get(MAX_COST, "")
    if why.startswith("its max cost") and cents.isdigit():
        text += f" ${int(cents) / 100:g} cap"
    return text


HEARTBEAT = 30.0  # seconds between lines while a wait without a terminal shows no change


@contextmanager
def progress(label: str) -> Iterator[Callable[[str, float], None]]:
    """A spinner on stderr showing `label`, the cloud state and time waited.

    On a terminal it animates; otherwise it prints one line per state change,
    so CI logs show progress without control characters.
    """
    console = err()
    if console.is_terminal:
        with console.status(escape(label)) as status:

            def update(state: str, elapsed: float) -> None:
                status.update(f"{escape(label)} [bold]{escape(state)}[/] ({human_age(elapsed)})")

            yield update
        return

    seen: set[str] = set()
    last_line = [time.monotonic()]

    def plain(state: str, elapsed: float) -> None:
        # One line per new state (several nodes may report in turn: each state once), and
        # a heartbeat while nothing changes, so a log shows the wait is alive.
        now = time.monotonic()
        if state in seen and now - last_line[0] < HEARTBEAT:
            return
        still = " still" if state in seen else ""
        seen.add(state)
        last_line[0] = now
        console.print(
            f"{escape(label)}{still} {escape(state)} ({human_age(elapsed)})", highlight=False
        )

    yield plain


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


@dataclass(frozen=True)
class Col:
    """A column of a list: `drop` orders what goes first when the terminal is narrow (0:
    never dropped); an identifier (`ident`) is never cut, since it is what users paste
    into the next command."""

    header: str
    drop: int = 0
    ident: bool = False
    right: bool = False
    fold: bool = False  # free text that may wrap instead of being dropped


GAP = 2  # columns between two cells of a table without a box (padding 1 each side)


def fitted(cols: list[Col], rows: list[list[str]], width: int | None, wide: bool = False) -> Table:
    """A table of `rows` (plain text, escaped here) in `width` columns: with every column
    when it fits or `wide`, else without the lowest-value columns, dropped one at a time
    (highest `drop` first) until it fits. Identifiers keep their full width whatever
    happens; a line longer than the terminal wraps rather than cut one."""
    from rich.cells import cell_len

    def natural(i: int) -> int:
        return max([cell_len(cols[i].header), *(cell_len(r[i]) for r in rows)])

    shown = list(range(len(cols)))
    needed = {i: natural(i) for i in shown}

    def total() -> int:
        return sum(needed[i] for i in shown if not cols[i].fold) + GAP * (len(shown) - 1)

    if not wide and width:
        droppable = sorted((i for i in shown if cols[i].drop), key=lambda i: -cols[i].drop)
        for i in droppable:
            if total() <= width:
                break
            shown.remove(i)
    # Still too wide (long names): the other columns fold onto more lines, never cut.
    squeezed = bool(width) and not wide and total() > (width or 0)
    table = _table(box=None, header_style="bold", pad_edge=False)
    for i in shown:
        col = cols[i]
        table.add_column(
            col.header,
            no_wrap=col.ident or not (col.fold or squeezed),
            overflow="fold",
            justify="right" if col.right else "left",
            min_width=needed[i] if col.ident else None,
        )
    for row in rows:
        table.add_row(*(escape(row[i]) for i in shown))
    return table


def table_width(console: Console, wide: bool) -> int | None:
    """The columns a table may take: the terminal's (None when piped: never cut)."""
    return None if wide or not console.is_terminal else console.width


def show_fitted(cols: list[Col], rows: list[list[str]], wide: bool = False) -> None:
    """Print a list fitted to the terminal (everything with `wide`, lines wrapping)."""
    console = out()
    table = fitted(cols, rows, table_width(console, wide), wide)
    if wide and console.is_terminal:
        console.width = max(console.width, 400)  # nothing cut: the terminal wraps the lines
    show(table, console)


NODE_COLUMNS = [
    Col("NAME", ident=True),
    Col("ZONE", ident=True),
    Col("ACCELERATOR"),
    Col("STATE"),
    Col("HEALTH", drop=9),
    Col("WORKERS", drop=4),
    Col("AGE", drop=3),
    Col("$/H", drop=1, right=True),
    Col("COST", drop=5, right=True),
    Col("OWNER", drop=8),
    Col("UTIL", drop=6, right=True),
    Col("IDLE", drop=7),
    Col("EXPIRES", drop=10),
]


API_COLUMN = Col("API", drop=2)  # tpu (the Cloud TPU API) or compute (Compute Engine)


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
                n.state,
                n.health or "-",
                str(len(n.workers)),
                human_age(n.age_seconds()),
                cost.money(cost.node_hourly(n)),
                "~" + cost.money(cost.so_far(n)),
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
    table = _table(box=None, show_header=False, pad_edge=False)
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
            f"~{cost.money(cost.so_far(node))} since creation ({cost.note()})",
        ),
    ]
    if node.topology:
        rows.append(("topology", f"{node.topology} (the slice's interconnect)"))
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


class StderrUi:
    """What a use case tells the user as it goes: lines and spinners on stderr."""

    def info(self, message: str) -> None:
        info(message)

    def progress(self, label: str) -> AbstractContextManager[Callable[[str, float], None]]:
        return progress(label)


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
        f"{node.name}  {node.zone}  {node.accelerator_type}  {node.state}", highlight=False
    )
    for w in node.workers:
        console.print(
            f"  worker {w.index}: {w.external_ip or '-'} (internal {w.internal_ip})",
            highlight=False,
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
        f"queued resource {name}: {len(slices)} slices; `tpuctl delete {name} --zone "
        f"{target.zone}` deletes them all"
    )
    for node in slices:
        show_node(node, json_out)


def print_format(rows: list[Any], fmt: str) -> None:
    """Rows in a gcloud --format (json, yaml, value(...), table(...), csv(...))."""
    from tpuctl.cli import projection

    sys.stdout.write(projection.render(rows, projection.parse_format(fmt)))
    sys.stdout.flush()
