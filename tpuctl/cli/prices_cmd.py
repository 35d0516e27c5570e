"""tpuctl prices: what a TPU type costs per hour where, on-demand and spot, with the
source of each price and its date."""

from __future__ import annotations

from typing import Annotated, Any

from tpuctl.cli import declare, render
from tpuctl.cli.options import Json
from tpuctl.errors import UsageError

ANY = "any"  # the region of a price of your own


def prices(
    accelerator: Annotated[
        str | None,
        declare.Argument(
            help="A TPU type (v5litepod-8, v6e-16, tpu7x-8) or a generation (v4); "
            "default: every generation, per chip.",
            show_default=False,
        ),
    ] = None,
    region: Annotated[
        str | None, declare.Option("--region", "-r", help="Only this region, e.g. us-east5.")
    ] = None,
    refresh: Annotated[
        bool,
        declare.Option("--refresh", help="Read Google's price catalog again (kept a day)."),
    ] = False,
    json_out: Json = False,
) -> None:
    """What a TPU costs per hour where, from Google's price catalog.

    Google's list prices from the Cloud Billing catalog, read with your credentials and
    kept a day; tpuctl's built-in table when the catalog cannot be read, said so.
    Example: tpuctl prices v6e-8 --region us-east5
    """
    from tpuctl import catalog
    from tpuctl.config import check_shape
    from tpuctl.services import cost
    from tpuctl.services import prices as price_book

    if region:
        check_shape("region", region, "--region")
    shape, generations = _asked(accelerator)
    book = price_book.refresh() if refresh else price_book.book()
    rows: list[dict[str, Any]] = []
    for gen in generations:
        for pod in (False, True) if gen in ("v2", "v3") and shape is None else (None,):
            one = shape or catalog.shape(_smallest(gen, pod))
            regions = _regions(book, gen, bool(pod) or one.quota_family.endswith(" pod"))
            if not regions and gen in cost.in_force():
                regions = [ANY]  # your own price, which names no region
            for where in regions:
                if region and where not in (region, ANY):
                    continue
                row = _row(cost, one, where, book, per_chip=shape is None)
                if row is not None:
                    rows.append(row)
    missing = sorted({g for g in generations if not any(r["generation"] == g for r in rows)})
    if json_out:
        render.print_json(
            {
                "source": book.line(read=True),
                "prices": rows,
                "noPublicPrice": missing,
                "region": region,
            }
        )
        return
    if rows:
        unit = "per chip-hour" if shape is None else "per hour of the slice"
        cols = [
            render.Col("TYPE", ident=True),
            render.Col("REGION", ident=True),
            render.Col("ON-DEMAND", right=True),
            render.Col("SPOT", right=True),
            render.Col("SOURCE", drop=1),
        ]
        render.show_fitted(
            cols,
            [
                [
                    r["type"],
                    r["region"],
                    cost.money(r["onDemandUsd"]),
                    cost.money(r["spotUsd"]),
                    r["source"],
                ]
                for r in rows
            ],
        )
        mine = sorted(cost.in_force())
        yours = f"; {', '.join(mine)} from {cost.MINE}" if mine else ""
        render.info(f"USD {unit}; estimates from {book.line(read=True)}{yours}")
    elif region and not missing:
        render.info(f"no price for {accelerator or 'any TPU'} in {region}")
    if missing and (line := cost.unpriced(missing, book)):
        render.info(line)


def _asked(accelerator: str | None) -> tuple[Any, list[str]]:
    """(the slice shape asked for, or None for a generation or all; the generations)."""
    from tpuctl import catalog

    if accelerator is None:
        return None, list(catalog.GENERATIONS)
    if accelerator in catalog.GENERATIONS:
        return None, [accelerator]
    shape = catalog.shape(accelerator)
    if not shape.known:
        raise UsageError(
            f"invalid TPU type {accelerator!r}: a type such as v5litepod-8, v6e-16 or "
            f"tpu7x-8, or a generation: {', '.join(catalog.GENERATIONS)}"
        )
    return shape, [shape.generation]


def _smallest(generation: str, pod: bool | None) -> str:
    """The smallest slice of a generation (of its pods, with `pod`)."""
    from tpuctl import catalog

    shapes = [
        s
        for s in catalog.SHAPES.values()
        if s.generation == generation and s.quota_family.endswith(" pod") == bool(pod)
    ]
    return min(shapes, key=lambda s: s.chips).name


def _regions(book: Any, generation: str, pod: bool) -> list[str]:
    """The regions with a price of the generation: the catalog's, or the table's."""
    from tpuctl.catalog import prices as builtin

    live = {r for x in book.rates if x.generation == generation and x.pod == pod for r in x.regions}
    if live:
        return sorted(live)
    rows = [r for r in builtin.ROWS if r.generation == generation and r.pod == pod]
    return sorted({region for r in rows for region in r.regions})


def _row(cost: Any, shape: Any, region: str, book: Any, per_chip: bool) -> dict[str, Any] | None:
    zone = "" if region == ANY else f"{region}-a"
    on_demand = cost.rate(shape, False, zone, book)
    spot = cost.rate(shape, True, zone, book)
    found = on_demand or spot
    if found is None or found.price.region not in (region, ""):
        return None
    chips = shape.chips if per_chip else 1
    name = shape.generation + (" pod" if shape.quota_family.endswith(" pod") else "")
    p = found.price
    return {
        "type": name if per_chip else shape.name,
        "generation": shape.generation,
        "region": region,
        "onDemandUsd": None if on_demand is None else round(on_demand.usd_per_hour / chips, 6),
        "spotUsd": None if spot is None else round(spot.usd_per_hour / chips, 6),
        "perChip": per_chip,
        "source": p.source + (f" {p.as_of}" if p.as_of else ""),
        "sku": p.sku,
    }
