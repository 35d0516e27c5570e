"""tpuctl top: every node, what it costs and what its TPUs are doing, live."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

from tpuctl.cli import declare, render, views
from tpuctl.cli.options import Filter, Format, Json, Limit, Project, SortBy, Zone, app_of, seconds

if TYPE_CHECKING:
    from rich.table import Table

    from tpuctl.services.metrics import Row, Snapshot

BLOCKS = "▁▂▃▄▅▆▇█"
# key -> (sort name, the row's sort key; largest first except by name and zone)
SORTS: dict[str, tuple[str, Any, bool]] = {
    "c": ("cost", lambda r: r.to_json()["hourlyUsd"] or 0.0, True),
    "u": ("util", lambda r: -1.0 if r.util is None else r.util, True),
    "i": ("idle", lambda r: -1.0 if r.idle_seconds is None else r.idle_seconds, True),
    "a": ("age", lambda r: r.node.age_seconds() or 0.0, True),
    "n": ("name", lambda r: r.node.name, False),
    "z": ("zone", lambda r: (r.node.zone, r.node.name), False),
}
BY_NAME = {name: key for key, (name, _, _) in SORTS.items()}
KEYS = "keys: c u i a n z sort (cost util idle age name zone), q quits"
WIDER = "a wider terminal or --json shows all"


def sparkline(values: list[float], width: int = 10) -> str:
    """Percentages (0-100) as block characters, the newest on the right."""
    tail = values[-width:]
    return "".join(BLOCKS[min(7, max(0, int(v / 100 * 7.999)))] for v in tail)


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}%"


def top(
    ctx: declare.Context,
    zone: Zone = None,
    project: Project = None,
    sort: Annotated[
        str,
        declare.Option("--sort", help="cost, util, idle, age, name or zone (keys c u i a n z)."),
    ] = "cost",
    interval: Annotated[
        float,
        declare.Option(
            "--interval",
            parser=seconds("--interval", 0.5),
            show_default=False,
            help="Time between refreshes, e.g. 10s (default 3s).",
        ),
    ] = 3.0,
    json_out: Json = False,
    fmt: Format = None,
    filter_text: Filter = None,
    sort_by: SortBy = None,
    limit: Limit = None,
) -> None:
    """Every TPU node, its cost and its TPUs' use, live (q quits).

    Example: tpuctl top --sort util      (without a terminal, or with --json: one snapshot)
    """
    from tpuctl.errors import UsageError
    from tpuctl.services import metrics

    if sort not in BY_NAME:
        raise UsageError(f"unknown --sort {sort!r}", hint="one of " + ", ".join(BY_NAME))
    app = app_of(ctx)
    target = app.target(project, zone, need_zone=False)
    backends = app.backends()
    states, live = _job_states(app, target.project)

    def take() -> Snapshot:
        return metrics.snapshot(
            backends, app.factory.monitoring, target.project, zone, states, live
        )

    if json_out or fmt or filter_text or sort_by or limit:  # one snapshot, of those rows
        from tpuctl.cli.projection import chosen

        rows = [r.to_json() for r in ordered(take().rows, BY_NAME[sort])]
        rows = [rows[i] for i in chosen(rows, filter_text, sort_by, limit)]
        render.print_format(rows, fmt) if fmt else render.print_json(rows)
        return
    if not (sys.stdout.isatty() and sys.stdin.isatty() and app.stdin_isatty):
        shot = take()
        console = render.out()
        shown, hidden = table(shot, BY_NAME[sort], render.table_width(console, False))
        render.show(shown, console)
        if hidden and shot.rows:
            render.info(render.hidden_line(hidden, WIDER))
        if shot.metrics_error:
            render.info(f"no metrics: {shot.metrics_error}")
        for line in shot.skipped:  # an API that could not be listed
            render.info(line)
        return
    _live(take, BY_NAME[sort], interval)


def _job_states(app: Any, project: str) -> tuple[Any, Any]:
    """Reads jobs' states from the bucket `tpuctl jobs` reads, checked as it checks it (a
    default bucket another project owns is refused); final ones are kept across
    refreshes (they never change). With them, a running job's chips as last read."""
    from tpuctl.cli.jobs import job_bucket
    from tpuctl.services import jobs

    made: list[Any] = []

    def states(job_ids: list[str]) -> dict[str, str]:
        if not made:  # the storage client, only once a node has a job
            made.append(jobs.JobStates(job_bucket(app, project, None)))
        return dict(made[0](job_ids))

    def live(job_id: str) -> list[dict[str, Any]]:
        return list(made[0].live.get(job_id, [])) if made and job_id else []

    return states, live


def ordered(rows: list[Row], key: str) -> list[Row]:
    _, by, reverse = SORTS[key]
    return sorted(rows, key=by, reverse=reverse)


TOP_COLUMNS = [
    render.Col("NAME", ident=True),
    render.Col("ZONE", ident=True),
    render.Col("ACCELERATOR"),
    render.Col("STATE"),
    render.Col("AGE", drop=6),
    render.Col("$/H", drop=1, right=True),
    render.Col("COST", drop=7, right=True),
    render.Col("UTIL", right=True),
    render.Col("LAST 10M", drop=3),
    render.Col("IDLE", drop=2),
    render.Col("JOB", drop=5),
    render.Col("JOB STATE", drop=4),
    render.Col("EXPIRES", drop=8),
    render.Col("OWNER", drop=9),
    render.Col("HBM", drop=10),
    render.Col("DUTY", drop=11, right=True),
    render.Col("TC UTIL", drop=12, right=True),
]


def chips_columns(workers: list[dict[str, Any]]) -> list[str]:
    """A running job's chips over all its workers (services/chips.py): HBM used of total,
    the mean duty cycle and the mean TensorCore utilisation (of the chips whose worker
    could read it: libtpu's SDK); `-` where none was read."""
    chips = [c for w in workers for c in w["chips"]]
    used = [c["hbmUsed"] for c in chips if c["hbmUsed"] is not None]
    total = [c["hbmTotal"] for c in chips if c["hbmTotal"] is not None]
    hbm = f"{sum(used) / (1 << 30):.0f}/{sum(total) / (1 << 30):.0f} GiB" if used and total else "-"
    means = []
    for key in ("dutyCycle", "tensorcoreUtilization"):
        seen = [c[key] for c in chips if c.get(key) is not None]
        means.append(percent(sum(seen) / len(seen)) if seen else "-")
    return [hbm, *means]


def table(shot: Snapshot, key: str, width: int | None = None) -> tuple[Table, list[str]]:
    """The snapshot's nodes, ordered by `key`, fitted to `width` columns (None: all), and
    the headers of the columns that did not fit."""
    from tpuctl.services import cost

    rows = []
    for r in ordered(shot.rows, key):
        j = r.to_json()
        rows.append(
            [
                r.node.name,
                r.node.zone,
                r.node.accelerator_type,
                views.state_text(r.node),
                render.human_age(j["ageSeconds"]),
                cost.money(j["hourlyUsd"]),
                cost.estimate(j["costSoFarUsd"]),
                percent(r.util),
                sparkline(j["history"]),
                render.human_age(r.idle_seconds),
                j["job"] or "-",
                j["jobState"] or "-",
                views.expiry_column(r.node.labels),
                j["owner"] or "-",
                *chips_columns(r.chips),
            ]
        )
    return render.fit(TOP_COLUMNS, rows, width)


def _live(take: Any, key: str, interval: float) -> None:
    """Full screen until q: a fresh snapshot every `interval` seconds or at a key press."""
    import select
    import termios
    import time
    import tty

    from rich.console import Group
    from rich.live import Live
    from rich.text import Text

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        with Live(console=render.out(), screen=True, auto_refresh=False) as live:
            while True:
                started = time.monotonic()
                shot = take()
                name = SORTS[key][0]
                took = time.monotonic() - started
                shown, hidden = table(shot, key, live.console.width)
                lines = [
                    f"tpuctl top: {len(shot.rows)} node(s), sorted by {name}, "
                    f"refreshed in {took:.1f}s",
                    KEYS,
                    *([f"no metrics: {shot.metrics_error}"] if shot.metrics_error else []),
                ]
                footer = [render.hidden_line(hidden, WIDER)] if hidden and shot.rows else []
                # Each line its own Text, folded rather than cut: the screen is redrawn in
                # place, so what does not fit would be lost, the keys' q with it.
                said = [Text(x, overflow="fold", no_wrap=False) for x in lines + footer]
                live.update(Group(*said[: len(lines)], shown, *said[len(lines) :]), refresh=True)
                ready, _, _ = select.select([fd], [], [], interval)
                if ready:
                    pressed = sys.stdin.read(1).lower()
                    if pressed == "q":
                        return
                    key = pressed if pressed in SORTS else key
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
