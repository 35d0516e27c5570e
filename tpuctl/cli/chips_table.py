"""The per-chip table of `tpuctl jobs JOB`: each running worker's chips as its agent read
them from libtpu (its runtime metrics; TensorCore use from its SDK where the job's Python
has it), or, where it could not, as Cloud Monitoring last sampled them
(services/chips.py, services/chip_metrics.py), each row naming its source."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from tpuctl.cli import render

CHIP_COLUMNS = [
    render.Col("WORKER", ident=True),
    render.Col("CHIP"),
    render.Col("HBM USED"),
    render.Col("HBM TOTAL"),
    render.Col("DUTY"),
    render.Col("TC UTIL"),
    render.Col("SOURCE"),
]
MONITORING = "monitoring"  # services/chip_metrics.SOURCE


def show_chips(
    workers: list[dict[str, Any]], name: Callable[[int], str], note: str | None = None
) -> None:
    """Each running worker's chips; `note`: why Cloud Monitoring gave none."""

    def gib(value: int | None) -> str:
        return "-" if value is None else f"{value / (1 << 30):.1f} GiB"

    def percent(value: float | None) -> str:
        return "-" if value is None else f"{value:.0f}%"

    monitored = {w["worker"] for w in workers if w["source"] == MONITORING}
    table = []
    for w in workers:
        age = "" if w["age"] is None else f", {render.human_age(w['age'])} ago"
        if w["source"] == MONITORING:
            source = f"Cloud Monitoring{age}"
        else:
            source = f"{w['source']} {w['address']}{age}"
        if w["error"]:
            table.append([name(w["worker"]), "-", "-", "-", "-", "-", f"{source}: {w['error']}"])
        for c in w["chips"]:
            figures = [gib(c["hbmUsed"]), gib(c["hbmTotal"]), percent(c["dutyCycle"])]
            tc = percent(c.get("tensorcoreUtilization"))
            table.append([name(w["worker"]), str(c["chip"]), *figures, tc, source])
    columns = CHIP_COLUMNS
    utilised = any(c.get("tensorcoreUtilization") is not None for w in workers for c in w["chips"])
    if monitored:
        sys.stdout.write(
            "\nchips, live (HBM, duty cycle and TensorCore use: from libtpu on each worker, "
            "else from Cloud Monitoring):\n"
        )
    elif utilised:  # libtpu's SDK gave TensorCore utilisation on some worker
        sys.stdout.write(
            "\nchips, live (HBM, duty cycle and TensorCore use from libtpu on each worker):\n"
        )
    else:
        sys.stdout.write("\nchips, live (HBM and duty cycle from libtpu on each worker):\n")
        columns = [c for c in CHIP_COLUMNS if c.header != "TC UTIL"]
        table = [row[:5] + row[6:] for row in table]
    render.show_fitted(columns, table, True)
    if monitored:
        sys.stdout.write(
            "Cloud Monitoring's figures are minutes behind (sampled every 60 s, visible up "
            "to 180 s later)\n"
        )
    unread = [w["worker"] for w in workers if not w["chips"] and w["worker"] not in monitored]
    if unread:
        why = note or (
            f"none yet for {', '.join(map(name, unread))} (their points arrive minutes late)"
        )
        sys.stdout.write(f"no per-chip figures from Cloud Monitoring: {why}\n")
    if any(w["error"] and w["worker"] not in monitored for w in workers):
        sys.stdout.write(
            "where libtpu could not be read, Cloud Monitoring's figures stand in: UTIL and "
            "IDLE above, `tpuctl top` per node (minutes behind)\n"
        )
