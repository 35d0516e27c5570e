"""CatalogApi: the adapter over the Cloud Billing Catalog API (cloudbilling.googleapis.com
v1, `services.skus.list`): Google's list prices of Cloud TPU chips, per region.

What this module knows of the catalog, and where it comes from (docs/cost.md, "Where
prices come from"):
- Cloud TPU's SKUs (service `E000-3F24-B8AA`) carry v2, v3 and v4; Compute Engine's
  (`6F81-5844-456A`) carry v5e, v5p and v6e, as the public mappers that read this API
  find them (SkyPilot's catalog fetcher, dstack's gpuhunt). Where TPU7x is billed is not
  public: its SKUs are looked for in both services, by the same rules.
- A TPU SKU has `category.resourceGroup` "TPU" and names its generation in its
  description (`Tpu-v3 ...`, `TpuV5e ...`, `Tpu v6e ...`); a spot SKU says "Preemptible"
  (its `usageType` too); v2 and v3 have separate SKUs for pod slices ("Pod").
- Units: v2 and v3 are priced per 8 TensorCores (one `-8` device, 4 chips); later
  generations per chip. Commitment, reservation and other special SKUs are left out.
The price is `units + nanos / 1e9` of the first tier of the first pricing info.
Google's library is imported inside the calls, so services may import this module.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

SERVICES = {"E000-3F24-B8AA": "Cloud TPU", "6F81-5844-456A": "Compute Engine"}
TIMEOUT = 20.0  # seconds per page
PAGE_SIZE = 5000  # the API's largest page
# Chips per priced unit, where a SKU is not per chip
_CHIPS_PER_UNIT = {"v2": 4, "v3": 4}
_GENERATION = re.compile(r"\btpu[\s_-]*(v?\d+[a-z]*)", re.IGNORECASE)
_NAMES = {"v5lite": "v5e", "v5litepod": "v5e", "7x": "tpu7x", "v7x": "tpu7x"}
# SKUs of other kinds of use than a plain on-demand or spot hour
_SPECIAL = re.compile(
    r"commit|reserv|sole tenan|custom|premium|calendar|dws|flex|suspend", re.IGNORECASE
)


@dataclass(frozen=True)
class TpuRate:
    """One TPU SKU's price: USD per chip-hour of `generation` in `regions`."""

    generation: str
    spot: bool
    pod: bool
    regions: tuple[str, ...]
    usd_per_chip_hour: float
    sku: str
    effective: str  # RFC 3339, when this price took effect


def generation_of(description: str) -> str | None:
    """The tpuctl generation a SKU's description names (`Tpu-v3 Pod` -> v3), or None."""
    m = _GENERATION.search(description)
    if not m:
        return None
    word = m.group(1).lower()
    word = _NAMES.get(word, word)
    if word[0].isdigit():
        word = "v" + word
    return word


def rate_of(sku: Any) -> TpuRate | None:
    """The TPU price a SKU (the library's `Sku`) gives, or None for any other SKU."""
    category = sku.category
    description = str(sku.description)
    if str(category.resource_group).upper() != "TPU" and "tpu" not in description.lower():
        return None
    usage = str(category.usage_type)
    if usage not in ("OnDemand", "Preemptible") or _SPECIAL.search(description):
        return None
    generation = generation_of(description)
    if generation is None or not sku.pricing_info:
        return None
    info = sku.pricing_info[0]
    expression = info.pricing_expression
    if not expression.tiered_rates or str(expression.usage_unit) not in ("h", ""):
        return None  # not priced per hour: not a rate tpuctl can use
    unit = expression.tiered_rates[0].unit_price
    usd = float(unit.units) + float(unit.nanos) / 1e9
    quantity = float(expression.display_quantity or 1)
    chips = _CHIPS_PER_UNIT.get(generation, 1)
    effective = info.effective_time
    when = effective.isoformat() if hasattr(effective, "isoformat") else str(effective or "")
    return TpuRate(
        generation=generation,
        spot=usage == "Preemptible" or "preemptible" in description.lower(),
        pod=" pod" in description.lower() and generation in _CHIPS_PER_UNIT,
        regions=tuple(str(r) for r in sku.service_regions),
        usd_per_chip_hour=usd / quantity / chips,
        sku=str(sku.sku_id),
        effective=when,
    )


class CatalogApi:
    """The TPU prices of Google's catalog, as the caller's credentials may read them."""

    def __init__(self, client: Any, where: str, unreachable_hint: str = "") -> None:
        self._client = client
        self._where = where
        self._hint = unreachable_hint

    def tpu_rates(self) -> list[TpuRate]:
        """Every TPU on-demand and spot rate of both services, all pages read; a
        CloudError (translated) when the catalog cannot be read."""
        from tpuctl.cloud.errors import translate

        rates: list[TpuRate] = []
        for service in SERVICES:
            request = {"parent": f"services/{service}", "currency_code": "USD"}
            request["page_size"] = PAGE_SIZE  # type: ignore[assignment]
            subject = f"the Cloud Billing catalog of {SERVICES[service]}"
            try:
                for sku in self._client.list_skus(request=request, timeout=TIMEOUT):
                    rate = rate_of(sku)
                    if rate is not None:
                        rates.append(rate)
            except Exception as e:  # noqa: BLE001 - Google's errors, translated
                raise translate(e, subject, self._where, self._hint) from None
        return rates
