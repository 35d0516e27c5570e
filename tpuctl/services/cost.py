"""Cost estimates from list prices: what a node costs per hour and has cost so far.

Prices are per chip-hour by generation (tpuctl.catalog.PRICES, taken from Google's public
list prices); a `[prices.<generation>]` table in tpuctl's config file overrides them
(`on_demand = 3.0`, `spot = 0.9`). Everything here is an estimate: regional prices,
discounts and commitments differ, and a stopped node's chips are not billed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tpuctl import catalog
from tpuctl.errors import ConfigError, UsageError
from tpuctl.models import NODE_STOPPED, Node

PriceTable = Mapping[str, tuple[float, float]]
KINDS = ("on_demand", "spot")


def price_table(config: Mapping[str, Any] | None = None) -> dict[str, tuple[float, float]]:
    """The catalogue's prices with the config file's `[prices.<generation>]` overrides;
    a malformed override is a ConfigError naming its key and what is allowed."""
    table = dict(catalog.PRICES)
    overrides = (config or {}).get("prices") or {}
    if not isinstance(overrides, Mapping):
        raise _bad("prices", overrides, "a table of [prices.<generation>]")
    for gen, override in overrides.items():
        if gen not in catalog.GENERATIONS:
            raise _bad(f"prices.{gen}", "", f"a generation: {', '.join(catalog.GENERATIONS)}")
        if not isinstance(override, Mapping):
            raise _bad(f"prices.{gen}", override, "a table with on_demand and/or spot")
        if gen not in table and "on_demand" not in override:  # no list price to start from
            raise _bad(f"prices.{gen}", "", "on_demand (it has no public list price)")
        on_demand, spot = table.get(gen) or (override["on_demand"], override["on_demand"])
        for key, value in override.items():
            ok = isinstance(value, int | float) and not isinstance(value, bool) and value >= 0
            if key not in KINDS or not ok:
                raise _bad(
                    f"prices.{gen}.{key}", value, "on_demand or spot: USD per chip-hour, >= 0"
                )
        table[gen] = (
            float(override.get("on_demand", on_demand)),
            float(override.get("spot", spot)),
        )
    return table


def _bad(key: str, value: Any, allowed: str) -> ConfigError:
    from tpuctl.config import config_file_path

    shown = f" = {value!r}" if value != "" else ""
    return ConfigError(
        f"invalid {key}{shown} in tpuctl's config file {config_file_path()}: expected {allowed}",
        hint='docs/gc.md, "Cost on screen", shows the format',
    )


_cache: dict[tuple[str, int], dict[str, tuple[float, float]]] = {}


def in_force() -> dict[str, tuple[float, float]]:
    """The price table every estimate uses: the catalogue's, with the config file's
    overrides (read again whenever the file changes)."""
    from tpuctl.config import config_file_path, load_config_file

    path = config_file_path()
    try:
        key = (str(path), path.stat().st_mtime_ns)
    except OSError:
        key = (str(path), 0)
    if key not in _cache:
        _cache.clear()
        _cache[key] = price_table(load_config_file())
    return _cache[key]


def note() -> str:
    """Where the prices come from, for every message that shows one."""
    mine = sorted(g for g, p in in_force().items() if p != catalog.PRICES.get(g))
    source = f"list prices as of {catalog.PRICES_AS_OF}"
    if mine:
        source += f" ({', '.join(mine)} from your config file)"
    return f"estimates from {source}; your bill may differ"


def unpriced(generations: Iterable[str]) -> str | None:
    """`no public price for tpu7x: ...`, once for those of `generations` tpuctl has no
    price for (None when it has one for each): never a `~-` left to guess at."""
    missing = sorted({g for g in generations if g and g not in in_force()})
    if not missing:
        return None
    names = ", ".join(missing)
    return (
        f"no public price for {names}: its cost is not estimated (set one in the config "
        f"file, [prices.{missing[0]}] on_demand = USD per chip-hour)"
    )


def hourly(
    shape: catalog.SliceShape, cheap: bool, prices: Mapping[str, tuple[float, float]] | None = None
) -> float | None:
    """USD per hour for a slice of this shape, or None for one without a price."""
    table = prices if prices is not None else in_force()
    if not shape.known or shape.price_key not in table:
        return None
    on_demand, spot = table[shape.price_key]
    return shape.chips * (spot if cheap else on_demand)


def node_hourly(
    node: Node, prices: Mapping[str, tuple[float, float]] | None = None
) -> float | None:
    """What the node costs per hour now (0 while stopped: its chips are released)."""
    if node.state in NODE_STOPPED - {"STOPPING"}:
        return 0.0
    return hourly(node.slice, node.spot or node.preemptible, prices)


def so_far(
    node: Node, now: float | None = None, prices: Mapping[str, tuple[float, float]] | None = None
) -> float | None:
    """Cost since creation at the node's rate (ignores time spent stopped)."""
    rate = hourly(node.slice, node.spot or node.preemptible, prices)
    age = node.age_seconds(now)
    if rate is None or age is None:
        return None
    return rate * age / 3600.0


def money(value: float | None, per_hour: bool = False) -> str:
    if value is None:
        return "-"
    text = f"${value:,.2f}" if value >= 0.995 or value == 0 else f"${value:.3f}"
    return text + ("/h" if per_hour else "")


def estimate(value: float | None) -> str:
    """`~$12.40`, or `-` where there is no price (never `~-`)."""
    return "-" if value is None else "~" + money(value)


MAX_DOLLARS = 1_000_000.0  # a cap past this is a typo


def parse_dollars(text: str, flag: str = "--max-cost") -> float:
    """US dollars as typed (`50`, `$12.50`); a UsageError naming `flag` when malformed,
    not more than zero, or absurd."""
    t = str(text).strip().removeprefix("$").replace(",", "")
    try:
        value = float(t)
    except ValueError:
        value = float("nan")
    if not 0 < value <= MAX_DOLLARS:  # NaN and inf fail too
        raise UsageError(
            f"invalid {flag} {text!r}: a number of US dollars more than 0 and at most "
            f"{MAX_DOLLARS:,.0f}, e.g. 50 or 12.50"
        )
    return value


def cap_seconds(shape: catalog.SliceShape, cheap: bool, dollars: float) -> tuple[int, float]:
    """How long a node of `shape` runs before it has cost `dollars` at its list price,
    and that price per hour; a UsageError for a shape with no price."""
    rate = hourly(shape, cheap)
    if not rate:
        raise UsageError(
            f"--max-cost needs a price for {shape.name}, and the price table has none",
            hint=f"add one in tpuctl's config file: [prices.{shape.price_key or shape.generation}] "
            'on_demand = ..., spot = ... (docs/gc.md, "Cost on screen")',
        )
    return max(1, int(dollars / rate * 3600)), rate
