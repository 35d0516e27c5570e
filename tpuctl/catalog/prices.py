"""The built-in price table: what tpuctl shows when it cannot read Google's own catalog
(the Cloud Billing Catalog API, services/prices.py). The only hand-typed prices in tpuctl.

USD per chip-hour, per generation and region, on-demand and spot, each row with its
source. Sources (docs/cost.md, "Where prices come from", lists them with links):
- SKY: skypilot-org/skypilot-catalog `catalogs/v7/gcp/vms.csv` at commit 017e2502, built
  from the Cloud Billing Catalog API (its per-slice rows divided here by the chips);
- GH: dstackai/gpuhunt `src/gpuhunt/resources/tpu_pricing.json` (copied by hand from
  Google's pricing pages; last changed 2024-12-23);
- TRI: Google's Trillium (v6e) GA announcement, December 2024 ("starting at" prices).
TPU7x has no public list price: no row, and every message says "no public price".
v2 and v3 price a single device (`-8`) and a pod slice differently (`pod`).
"""

from __future__ import annotations

from dataclasses import dataclass

AS_OF = "2026-12"  # when the table was last checked against its sources


@dataclass(frozen=True)
class PriceRow:
    generation: str
    regions: tuple[str, ...]
    on_demand: float
    spot: float | None
    source: str
    pod: bool = False  # v2/v3: the row of pod slices (more than 8 TensorCores)


def _row(gen: str, regions: str, on_demand: float, spot: float | None, source: str) -> PriceRow:
    pod = gen.endswith(" pod")
    return PriceRow(gen.removesuffix(" pod"), tuple(regions.split()), on_demand, spot, source, pod)


ROWS: tuple[PriceRow, ...] = (
    _row("v2", "us-central1", 1.125, 0.3375, "SKY"),
    _row("v2", "europe-west4", 1.2375, 0.3156, "SKY, GH"),
    _row("v2", "asia-east1", 1.305, 0.3915, "SKY, GH"),
    _row("v2 pod", "us-central1 europe-west4", 1.50, 0.3825, "SKY, GH"),
    _row("v3", "us-central1", 2.00, 0.51, "SKY"),
    _row("v3", "europe-west4", 2.20, 0.561, "SKY, GH"),
    _row("v3 pod", "europe-west4", 2.00, 0.66, "SKY, GH"),
    _row("v4", "us-central2", 3.22, 0.9215, "SKY"),
    _row("v5e", "us-central1 us-east1 us-west1", 1.20, 0.213, "SKY"),
    _row("v5e", "us-east5", 1.20, 0.60, "SKY, GH"),
    _row("v5e", "us-west4", 1.20, 0.4692, "SKY"),
    _row("v5e", "us-south1", 1.416, 0.5664, "SKY"),
    _row("v5e", "europe-west4", 1.56, 0.4426, "SKY"),
    _row("v5e", "asia-southeast1", 1.56, 0.78, "SKY, GH"),
    _row("v5p", "us-central1 us-east1", 4.20, 1.68, "SKY"),
    _row("v5p", "us-east5", 4.20, 1.5601, "SKY"),
    _row("v5p", "europe-west4", 4.2525, 1.3485, "SKY"),
    _row("v5p", "us-south1", 4.779, 2.3954, "SKY"),
    _row("v6e", "us-central1 us-east1 us-west1", 2.70, 0.6483, "SKY, TRI"),
    _row("v6e", "us-east5", 2.70, 1.08, "SKY"),
    _row("v6e", "europe-west4", 2.97, 0.7132, "SKY"),
    _row("v6e", "asia-northeast1", 3.24, 1.0768, "SKY"),
)
