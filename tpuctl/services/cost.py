"""Cost estimates from list prices: what a node costs per hour and has cost so far.

Prices are per chip-hour by generation (tpuctl.catalog.PRICES, taken from Google's public
list prices); a `[prices.<generation>]` table in tpuctl's config file overrides them
(`on_demand = 3.0`, `spot = 0.9`). Everything here is an estimate: regional prices,
discounts and commitments differ, and a stopped node's chips are not billed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tpuctl import catalog
from tpuctl.models import STOPPED_STATES, Node

NOTE = f"estimates from list prices as of {catalog.PRICES_AS_OF}; your bill may differ"


def price_table(config: Mapping[str, Any] | None = None) -> dict[str, tuple[float, float]]:
    table = dict(catalog.PRICES)
    for gen, override in ((config or {}).get("prices") or {}).items():
        if gen in table and isinstance(override, Mapping):
            on_demand, spot = table[gen]
            table[gen] = (
                float(override.get("on_demand", on_demand)),
                float(override.get("spot", spot)),
            )
    return table


def hourly(
    accelerator: str, cheap: bool, prices: Mapping[str, tuple[float, float]] | None = None
) -> float | None:
    """USD per hour for a slice of this type, or None for an unknown type."""
    acc = catalog.parse_accelerator(accelerator)
    if acc is None:
        return None
    table = prices or catalog.PRICES
    if acc.generation not in table:
        return None
    on_demand, spot = table[acc.generation]
    return acc.chips * (spot if cheap else on_demand)


def node_hourly(
    node: Node, prices: Mapping[str, tuple[float, float]] | None = None
) -> float | None:
    """What the node costs per hour now (0 while stopped: its chips are released)."""
    if node.state in STOPPED_STATES - {"STOPPING"}:
        return 0.0
    return hourly(node.accelerator_type, node.spot or node.preemptible, prices)


def so_far(
    node: Node, now: float | None = None, prices: Mapping[str, tuple[float, float]] | None = None
) -> float | None:
    """Cost since creation at the node's rate (ignores time spent stopped)."""
    rate = hourly(node.accelerator_type, node.spot or node.preemptible, prices)
    age = node.age_seconds(now)
    if rate is None or age is None:
        return None
    return rate * age / 3600.0


def money(value: float | None, per_hour: bool = False) -> str:
    if value is None:
        return "-"
    text = f"${value:,.2f}" if value >= 0.995 or value == 0 else f"${value:.3f}"
    return text + ("/h" if per_hour else "")
