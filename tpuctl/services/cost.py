"""Cost estimates from list prices: what a node costs per hour and has cost so far.

Prices are per chip-hour, by generation and region (services/prices.py: Google's
catalog, or tpuctl's built-in table when it cannot be read, said so); a
`[prices.<generation>]` table in tpuctl's config file overrides them (`on_demand = 3.0`,
`spot = 0.9`: a negotiated price, say). Everything here is an estimate: discounts and
commitments differ. A stopped node's chips are not billed, so its cost so far stays
where it was when it stopped (the `tpuctl-ran` and `tpuctl-started` labels `tpuctl
stop` and `start` keep); its boot disk is, and is not counted here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tpuctl import catalog
from tpuctl.errors import ConfigError, UsageError
from tpuctl.models import NODE_STOPPED, Node
from tpuctl.services import prices as price_book
from tpuctl.services.prices import Book, Price

# generation -> (on-demand, spot) USD per chip-hour from the config file (None: not set)
Pair = tuple[float | None, float | None]
Overrides = Mapping[str, Pair]
KINDS = ("on_demand", "spot")
NO_PRICE = "n/a"  # a cell with no price: never "-", which reads like nothing owed
MINE = "your config file"


def price_table(
    config: Mapping[str, Any] | None = None,
) -> dict[str, tuple[float | None, float | None]]:
    """The config file's `[prices.<generation>]` overrides; a malformed one is a
    ConfigError naming its key and what is allowed."""
    table: dict[str, Pair] = {}
    overrides = (config or {}).get("prices") or {}
    if not isinstance(overrides, Mapping):
        raise _bad("prices", overrides, "a table of [prices.<generation>]")
    for gen, override in overrides.items():
        if gen not in catalog.GENERATIONS:
            raise _bad(f"prices.{gen}", "", f"a generation: {', '.join(catalog.GENERATIONS)}")
        if not isinstance(override, Mapping) or not override:
            raise _bad(f"prices.{gen}", override, "a table with on_demand and/or spot")
        for key, value in override.items():
            ok = isinstance(value, int | float) and not isinstance(value, bool) and value >= 0
            if key not in KINDS or not ok:
                raise _bad(
                    f"prices.{gen}.{key}", value, "on_demand or spot: USD per chip-hour, >= 0"
                )
        on_demand, spot = override.get("on_demand"), override.get("spot")
        table[gen] = (
            None if on_demand is None else float(on_demand),
            None if spot is None else float(spot),
        )
    return table


def _bad(key: str, value: Any, allowed: str) -> ConfigError:
    from tpuctl.config import config_file_path

    shown = f" = {value!r}" if value != "" else ""
    return ConfigError(
        f"invalid {key}{shown} in tpuctl's config file {config_file_path()}: expected {allowed}",
        hint='docs/cost.md, "Your own prices", shows the format',
    )


_cache: dict[tuple[str, int], dict[str, Pair]] = {}


def in_force() -> dict[str, Pair]:
    """The config file's overrides (read again whenever the file changes)."""
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


@dataclass(frozen=True)
class Rate:
    """What one slice of a shape costs per hour where, and on what price."""

    usd_per_hour: float
    price: Price

    @property
    def basis(self) -> str:
        """`the Cloud Billing list price of 2026-11-01 in us-central1`, for receipts."""
        p = self.price
        if p.source == MINE:
            return "the price in your config file"
        if p.source == price_book.LIVE:
            return f"the Cloud Billing list price of {p.as_of} in {p.region}"
        return f"tpuctl's built-in price of {p.as_of} in {p.region}"


def rate(
    shape: catalog.SliceShape,
    cheap: bool,
    zone: str = "",
    book: Book | None = None,
    overrides: Overrides | None = None,
) -> Rate | None:
    """USD per hour of a slice of `shape` in `zone` (its region's price), or None where
    no price is known (TPU7x; a spot price nobody publishes)."""
    if not shape.known:
        return None
    mine = (in_force() if overrides is None else overrides).get(shape.generation)
    if mine is not None and mine[1 if cheap else 0] is not None:
        value = float(mine[1 if cheap else 0])  # type: ignore[arg-type]
        return Rate(shape.chips * value, Price(value, MINE, "", ""))
    book = price_book.book() if book is None else book
    region = price_book.region_of(zone) if zone else ""
    pod = shape.quota_family.endswith(" pod")
    found = book.price(shape.generation, pod, cheap, region)
    return None if found is None else Rate(shape.chips * found.usd_per_chip_hour, found)


def where(found: Rate, zone: str) -> str:
    """` in us-central1`, or where the price is of when the zone's region has none."""
    region = price_book.region_of(zone) if zone else ""
    of = found.price.region
    if not of or not region:
        return f" in {region}" if region and of else ""
    return f" in {region}" if of == region else f" in {region} (at {of}'s price: none for {region})"


def hourly(
    shape: catalog.SliceShape,
    cheap: bool,
    zone: str = "",
    book: Book | None = None,
    overrides: Overrides | None = None,
) -> float | None:
    """USD per hour for a slice of this shape in `zone`, or None for one without a price."""
    found = rate(shape, cheap, zone, book, overrides)
    return None if found is None else found.usd_per_hour


def node_hourly(node: Node, book: Book | None = None) -> float | None:
    """What the node costs per hour now (0 while stopped: its chips are released; None
    for a reserved node, billed through its reservation at a price tpuctl cannot know)."""
    if node.state in NODE_STOPPED - {"STOPPING"}:
        return 0.0
    if node.reserved:
        return None
    return hourly(node.slice, node.spot or node.preemptible, node.zone, book)


def ran_seconds(node: Node, now: float | None = None) -> float | None:
    """The seconds the node has run since its creation: the time before its last stop
    (`tpuctl-ran`) plus, while it runs, the time since its last start (`tpuctl-started`,
    else its creation). A node stopped outside tpuctl, with no record of when: None."""
    import time

    from tpuctl.agent.labels import RAN, STARTED

    now = time.time() if now is None else now
    ran = node.label_time(RAN) or 0.0
    stopped = node.state in NODE_STOPPED - {"STOPPING"}
    if stopped:
        return ran if RAN in node.labels else None
    started = node.label_time(STARTED)
    if started is None:
        return node.age_seconds(now)
    return ran + max(0.0, now - started)


def so_far(node: Node, now: float | None = None, book: Book | None = None) -> float | None:
    """Cost since creation at the node's rate, counting only the time it ran (None for a
    reserved node: its reservation's price is its own contract)."""
    if node.reserved:
        return None
    per_hour = hourly(node.slice, node.spot or node.preemptible, node.zone, book)
    seconds = ran_seconds(node, now)
    if per_hour is None or seconds is None:
        return None
    return per_hour * seconds / 3600.0


def note(book: Book | None = None) -> str:
    """Where the prices come from, for every message that shows one."""
    book = price_book.book() if book is None else book
    mine = sorted(in_force())
    source = book.line()
    if mine:
        source += f" ({', '.join(mine)} from {MINE})"
    return f"estimates from {source}; your bill may differ"


def unpriced(generations: Iterable[str], book: Book | None = None) -> str | None:
    """`no public price for tpu7x: ...`, once for those of `generations` tpuctl has no
    price for (None when it has one for each): never a `~-` left to guess at."""
    known = set(in_force()) | (price_book.book() if book is None else book).generations()
    missing = sorted({g for g in generations if g and g not in known})
    if not missing:
        return None
    names = ", ".join(missing)
    return (
        f"no public price for {names}: its cost is not estimated (set one in the config "
        f"file, [prices.{missing[0]}] on_demand = USD per chip-hour)"
    )


def money(value: float | None, per_hour: bool = False) -> str:
    if value is None:
        return NO_PRICE
    text = f"${value:,.2f}" if value >= 0.995 or value == 0 else f"${value:.3f}"
    return text + ("/h" if per_hour else "")


def estimate(value: float | None) -> str:
    """`~$12.40`, or `n/a` where there is no price (never `~-`)."""
    return NO_PRICE if value is None else "~" + money(value)


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


def cap_seconds(
    shape: catalog.SliceShape, cheap: bool, dollars: float, zone: str = ""
) -> tuple[int, float]:
    """How long a node of `shape` runs before it has cost `dollars` at its region's list
    price, and that price per hour; a UsageError for a shape with no price."""
    per_hour = hourly(shape, cheap, zone)
    if not per_hour:
        raise UsageError(
            f"--max-cost needs a price for {shape.name}, and it has no public price",
            hint=f"add one in tpuctl's config file: [prices.{shape.price_key or shape.generation}] "
            'on_demand = ..., spot = ... (docs/cost.md, "Your own prices")',
        )
    return max(1, int(dollars / per_hour * 3600)), per_hour
