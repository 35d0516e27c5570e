"""The emulator's SKU table for the Cloud Billing Catalog API, in the API's own units.

Figures (USD) are list prices as third parties saw them, per chip-hour there, turned
into SKU units here: v2 and v3 per 8 TensorCores (one v2-8/v3-8 device, 4 chips: 4x
the per-chip figure), v4, v5e, v5p and v6e per chip.
- [SKY] skypilot-org/skypilot-catalog `catalogs/v7/gcp/vms.csv` (built from this API);
- [GH] dstackai/gpuhunt `src/gpuhunt/resources/tpu_pricing.json` (from Google's pages);
- [TRI] Google's Trillium GA announcement, December 2024 (v6e on-demand, 1- and 3-year).
No TPU7x SKU: no public evidence of its SKU was found.

Services: Cloud TPU `E000-3F24-B8AA` carries v2, v3 and v4; Compute Engine
`6F81-5844-456A` carries v5e, v5p and v6e (SkyPilot's `sky/catalog/data_fetchers/
fetch_gcp.py`, "TPU V5 SKU is not included in the TPU SKUs but in the GCE SKUs", and
gpuhunt's `providers/gcp.py`).

Descriptions. Seen in public sources (what those mappers match in a description):
`Tpu-v2`, `Tpu-v3`, `Tpu-v4`, `Pod` for pod slices (v2/v3) and for v4, `TpuV5e`,
`TpuV5p`, `TpuV6e`, `Preemptible` in a spot SKU's description, and (SkyPilot's note)
a preemptible TPU SKU's usageType being `OnDemand`; Compute Engine's `Spot Preemptible
<family> GPU|Core|Ram` and `<family> Instance Core|Ram` (gpuhunt's regex), `... GPU`
with usageType `Preemptible` for spot (gpuhunt). Inferred, not seen: the rest of each
sentence (`Device`, `running in <place>`), the place names, `Commitment v1: ... for 1
Year` for commitments, and that v5e/v5p/v6e spot SKUs (Compute Engine's) carry usageType
`Preemptible` as Compute Engine's spot SKUs do. The N2 and T4 figures are illustrative
(Google's us-central1 list prices as remembered, not from a source above).
"""

from __future__ import annotations

import hashlib
from decimal import Decimal
from typing import Any

TPU_SERVICE = "E000-3F24-B8AA"
COMPUTE_SERVICE = "6F81-5844-456A"
SERVICES: dict[str, str] = {TPU_SERVICE: "Cloud TPU", COMPUTE_SERVICE: "Compute Engine"}
EFFECTIVE_TIME = "2026-11-01T08:00:00Z"  # when this table's prices took effect

AMERICAS_V5E = ["us-central1", "us-east1", "us-west1", "us-east5", "us-west4"]
US_3 = ["us-central1", "us-east1", "us-west1"]
PLACES = {
    "us-central1": "Iowa",
    "us-central2": "Oklahoma",
    "us-east5": "Columbus",
    "us-south1": "Dallas",
    "us-west4": "Las Vegas",
    "europe-west4": "Netherlands",
    "asia-east1": "Taiwan",
    "asia-southeast1": "Singapore",
    "asia-northeast1": "Tokyo",
}

# (service, subject, regions, on-demand per SKU unit, spot per SKU unit); subject is the
# description's start: a v2/v3 row is per device (4 chips), the others per chip
_TPU_ROWS: list[tuple[str, str, list[str], str | None, str | None]] = [
    (TPU_SERVICE, "Tpu-v2 Device", ["us-central1"], "4.5", "1.35"),  # SKY
    (TPU_SERVICE, "Tpu-v2 Device", ["europe-west4"], "4.95", "1.2624"),  # SKY, GH
    (TPU_SERVICE, "Tpu-v2 Device", ["asia-east1"], "5.22", "1.566"),  # SKY, GH
    (TPU_SERVICE, "Tpu-v2 Pod", ["us-central1"], "6", "1.53"),  # SKY, GH
    (TPU_SERVICE, "Tpu-v2 Pod", ["europe-west4"], "6", "1.53"),  # SKY, GH
    (TPU_SERVICE, "Tpu-v3 Device", ["us-central1"], "8", "2.04"),  # SKY
    (TPU_SERVICE, "Tpu-v3 Device", ["europe-west4"], "8.8", "2.244"),  # SKY, GH
    (TPU_SERVICE, "Tpu-v3 Pod", ["europe-west4"], "8", "2.64"),  # SKY, GH
    (TPU_SERVICE, "Tpu-v4 Pod", ["us-central2"], "3.22", "0.9215"),  # SKY
    (COMPUTE_SERVICE, "TpuV5e", AMERICAS_V5E, "1.2", None),  # SKY
    (COMPUTE_SERVICE, "TpuV5e", US_3, None, "0.213"),
    (COMPUTE_SERVICE, "TpuV5e", ["us-east5"], None, "0.6"),
    (COMPUTE_SERVICE, "TpuV5e", ["us-west4"], None, "0.4692"),
    (COMPUTE_SERVICE, "TpuV5e", ["us-south1"], "1.416", "0.5664"),
    (COMPUTE_SERVICE, "TpuV5e", ["europe-west4"], "1.56", "0.4426"),
    (COMPUTE_SERVICE, "TpuV5e", ["asia-southeast1"], "1.56", "0.78"),
    (COMPUTE_SERVICE, "TpuV5p", ["us-central1", "us-east1", "us-east5"], "4.2", None),
    (COMPUTE_SERVICE, "TpuV5p", ["us-central1", "us-east1"], None, "1.68"),
    (COMPUTE_SERVICE, "TpuV5p", ["us-east5"], None, "1.5601"),
    (COMPUTE_SERVICE, "TpuV5p", ["europe-west4"], "4.2525", "1.3485"),
    (COMPUTE_SERVICE, "TpuV5p", ["us-south1"], "4.779", "2.3954"),
    (COMPUTE_SERVICE, "TpuV6e", [*US_3, "us-east5"], "2.7", None),  # SKY, TRI
    (COMPUTE_SERVICE, "TpuV6e", US_3, None, "0.6483"),
    (COMPUTE_SERVICE, "TpuV6e", ["us-east5"], None, "1.08"),
    (COMPUTE_SERVICE, "TpuV6e", ["europe-west4"], "2.97", "0.7132"),
    (COMPUTE_SERVICE, "TpuV6e", ["asia-northeast1"], "3.24", "1.0768"),
]
_V6E_COMMIT_REGIONS = ["us-central1", "us-east1", "us-east5"]  # TRI: "US launch regions"
_HOUR = ("h", "hour", "s", "second", 3600)
_GIB_HOUR = ("GiBy.h", "gibibyte hour", "By.s", "byte second", 3865470566400)


def _place(regions: list[str]) -> str:
    return PLACES[regions[0]] if len(regions) == 1 else "Americas"


def sku_id(service: str, description: str) -> str:
    """A stable made-up id in the real format (`XXXX-XXXX-XXXX`, hex)."""
    digest = hashlib.sha256(f"{service}/{description}".encode()).hexdigest()[:12].upper()
    return f"{digest[:4]}-{digest[4:8]}-{digest[8:]}"


def unit_price(price: str) -> dict[str, Any]:
    """A google.type.Money in USD: units (int64, a JSON string) and nanos."""
    amount = Decimal(price)
    units = int(amount)
    return {"currencyCode": "USD", "units": str(units), "nanos": int((amount - units) * 10**9)}


def make_sku(
    service: str,
    description: str,
    group: str,
    usage: str,
    regions: list[str],
    price: str,
    unit: tuple[str, str, str, str, int] = _HOUR,
    effective: str = EFFECTIVE_TIME,
) -> dict[str, Any]:
    """One SKU as the Catalog API renders it."""
    skuid = sku_id(service, description)
    usage_unit, usage_desc, base, base_desc, factor = unit
    expression = {
        "usageUnit": usage_unit,
        "displayQuantity": 1,
        "tieredRates": [{"startUsageAmount": 0, "unitPrice": unit_price(price)}],
        "usageUnitDescription": usage_desc,
        "baseUnit": base,
        "baseUnitDescription": base_desc,
        "baseUnitConversionFactor": factor,
    }
    return {
        "name": f"services/{service}/skus/{skuid}",
        "skuId": skuid,
        "description": description,
        "category": {
            "serviceDisplayName": SERVICES[service],
            "resourceFamily": "Compute",
            "resourceGroup": group,
            "usageType": usage,
        },
        "serviceRegions": list(regions),
        "pricingInfo": [
            {
                "summary": "",
                "pricingExpression": expression,
                "currencyConversionRate": 1,
                "effectiveTime": effective,
            }
        ],
        "serviceProviderName": "Google",
        "geoTaxonomy": {"type": "REGIONAL", "regions": list(regions)},
    }


def _tpu_skus() -> list[dict[str, Any]]:
    skus = []
    for service, subject, regions, on_demand, spot in _TPU_ROWS:
        where = f"running in {_place(regions)}"
        if on_demand is not None:
            skus.append(
                make_sku(service, f"{subject} {where}", "TPU", "OnDemand", regions, on_demand)
            )
        if spot is not None:
            # Cloud TPU's preemptible SKUs are usageType OnDemand (SkyPilot's note)
            usage = "OnDemand" if service == TPU_SERVICE else "Preemptible"
            desc = f"Preemptible {subject} {where}"
            skus.append(make_sku(service, desc, "TPU", usage, regions, spot))
    for years, price in (("1", "1.89"), ("3", "1.22")):  # TRI
        desc = f"Commitment v1: TpuV6e in Americas for {years} Year"
        usage = f"Commit{years}Yr"
        skus.append(make_sku(COMPUTE_SERVICE, desc, "TPU", usage, _V6E_COMMIT_REGIONS, price))
    return skus


def _other_skus() -> list[dict[str, Any]]:
    """Compute Engine SKUs a TPU price reader must filter out (illustrative figures)."""
    where = "running in Americas"
    return [
        make_sku(COMPUTE_SERVICE, f"N2 Instance Core {where}", "CPU", "OnDemand", US_3, "0.031611"),
        make_sku(
            COMPUTE_SERVICE,
            f"N2 Instance Ram {where}",
            "RAM",
            "OnDemand",
            US_3,
            "0.004237",
            _GIB_HOUR,
        ),
        make_sku(COMPUTE_SERVICE, f"Nvidia Tesla T4 GPU {where}", "GPU", "OnDemand", US_3, "0.35"),
        make_sku(
            COMPUTE_SERVICE,
            f"Spot Preemptible Nvidia Tesla T4 GPU {where}",
            "GPU",
            "Preemptible",
            US_3,
            "0.14",
        ),
    ]


def default_skus() -> dict[str, dict[str, Any]]:
    """The table a fresh emulator serves, by skuId."""
    return {sku["skuId"]: sku for sku in _tpu_skus() + _other_skus()}
