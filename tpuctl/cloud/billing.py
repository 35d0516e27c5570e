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
Read over REST with the credentials' session (cloud/session.py), as the other reads `list`
makes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MAX_PAGES = 100  # 500,000 SKUs: more is no catalog
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


def rate_of(sku: dict[str, Any]) -> TpuRate | None:
    """The TPU price a SKU (as the API's JSON has it) gives, or None for any other SKU."""
    category = sku.get("category") or {}
    description = str(sku.get("description") or "")
    if str(category.get("resourceGroup") or "").upper() != "TPU" and (
        "tpu" not in description.lower()
    ):
        return None
    usage = str(category.get("usageType") or "")
    if usage not in ("OnDemand", "Preemptible") or _SPECIAL.search(description):
        return None
    generation = generation_of(description)
    infos = sku.get("pricingInfo") or []
    if generation is None or not infos:
        return None
    info = infos[0]
    expression = info.get("pricingExpression") or {}
    tiers = expression.get("tieredRates") or []
    if not tiers or str(expression.get("usageUnit") or "h") != "h":
        return None  # not priced per hour: not a rate tpuctl can use
    unit = tiers[0].get("unitPrice") or {}
    try:
        usd = float(unit.get("units") or 0) + float(unit.get("nanos") or 0) / 1e9
        quantity = float(expression.get("displayQuantity") or 1)
    except (TypeError, ValueError):
        return None
    if quantity <= 0 or usd < 0:
        return None
    return TpuRate(
        generation=generation,
        spot=usage == "Preemptible" or "preemptible" in description.lower(),
        pod=" pod" in description.lower() and generation in _CHIPS_PER_UNIT,
        regions=tuple(str(r) for r in sku.get("serviceRegions") or []),
        usd_per_chip_hour=usd / quantity / _CHIPS_PER_UNIT.get(generation, 1),
        sku=str(sku.get("skuId") or ""),
        effective=str(info.get("effectiveTime") or ""),
    )


class CatalogApi:
    """The TPU prices of Google's catalog, as the caller's credentials may read them
    (REST through the credentials' session: no gRPC loaded, so `list` stays quick)."""

    def __init__(
        self, session: Callable[[], Any], endpoint: str, where: str, unreachable_hint: str = ""
    ) -> None:
        self._session = session
        self._endpoint = endpoint.rstrip("/")
        self._where = where
        self._hint = unreachable_hint

    def tpu_rates(self) -> list[TpuRate]:
        """Every TPU on-demand and spot rate of both services, all pages read; a
        TpuctlError (translated) when the catalog cannot be read."""
        from tpuctl.cloud import rest

        rates: list[TpuRate] = []
        for service, title in SERVICES.items():
            url = f"{self._endpoint}/v1/services/{service}/skus"
            params = {"currencyCode": "USD", "pageSize": str(PAGE_SIZE)}
            for _ in range(MAX_PAGES):
                try:
                    page = rest.send(self._session, "GET", url, params=params, timeout=TIMEOUT)
                except Exception as e:  # noqa: BLE001 - Google's errors, translated
                    from tpuctl.cloud.errors import translate  # loads grpc: on a failure only

                    subject = f"the Cloud Billing catalog of {title}"
                    raise translate(e, subject, self._where, self._hint) from None
                rates += [r for s in page.get("skus") or [] if (r := rate_of(s)) is not None]
                token = page.get("nextPageToken")
                if not token:
                    break
                params["pageToken"] = str(token)
        return rates
