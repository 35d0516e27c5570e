"""The control plane's view of the catalog (`/_emulator/v1/billing/skus`): list the SKU
table, add or replace a SKU by skuId (its service from its `name`), remove one. A SKU
changed here takes effect now (its pricingInfo's effectiveTime). Run under the backend's
lock, as control/api.py's functions are."""

from __future__ import annotations

import copy
import re
from typing import Any

from tpuctl.emulator.billing import skus as table
from tpuctl.emulator.core import errors
from tpuctl.emulator.core.timestamps import rfc3339

_NAME = re.compile(
    r"services/([0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4})/skus/([0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4})"
)


def _check(sku: Any) -> str | None:
    """What is wrong with a SKU as the Catalog API has it, or None."""
    if not isinstance(sku, dict):
        return "sku must be an object (a SKU as the Catalog API has it)"
    match = _NAME.fullmatch(str(sku.get("name", "")))
    if not match:
        return "sku.name must be services/{serviceId}/skus/{skuId} (ids like 6F81-5844-456A)"
    if match.group(1) not in table.SERVICES:
        return f"sku.name names service {match.group(1)}, not one of {sorted(table.SERVICES)}"
    if sku.get("skuId") != match.group(2):
        return "sku.skuId must be the skuId its name ends with"
    if not isinstance(sku.get("description"), str) or not sku["description"]:
        return "sku.description must be a non-empty string"
    category = sku.get("category")
    if not isinstance(category, dict) or not all(
        isinstance(category.get(k), str) for k in ("resourceFamily", "resourceGroup", "usageType")
    ):
        return "sku.category needs resourceFamily, resourceGroup and usageType (strings)"
    regions = sku.get("serviceRegions")
    if not isinstance(regions, list) or not all(isinstance(r, str) and r for r in regions):
        return "sku.serviceRegions must be a list of region names"
    info = sku.get("pricingInfo")
    if not isinstance(info, list) or not info or not isinstance(info[0], dict):
        return "sku.pricingInfo must be a non-empty list"
    expression = info[0].get("pricingExpression")
    rates = expression.get("tieredRates") if isinstance(expression, dict) else None
    if not isinstance(rates, list) or not rates or not isinstance(rates[0], dict):
        return "sku.pricingInfo[0].pricingExpression.tieredRates must be a non-empty list"
    price = rates[0].get("unitPrice")
    if not isinstance(price, dict) or price.get("currencyCode", "USD") != "USD":
        return "sku.pricingInfo[0]...tieredRates[0].unitPrice must be a Money in USD"
    units, nanos = price.get("units", "0"), price.get("nanos", 0)
    if not re.fullmatch(r"-?\d+", str(units)) or isinstance(units, bool):
        return "unitPrice.units must be an integer (a string, as int64 is in JSON)"
    if not isinstance(nanos, int) or isinstance(nanos, bool) or not -(10**9) < nanos < 10**9:
        return "unitPrice.nanos must be an integer between -999999999 and 999999999"
    return None


def list_skus(state: Any) -> dict[str, Any]:
    """Every SKU served, of every service, by name."""
    served = sorted(state.billing.skus().values(), key=lambda s: s["name"])
    return {"skus": copy.deepcopy(served)}


def put_sku(state: Any, sku: Any) -> dict[str, Any]:
    """Add or replace the SKU of its skuId; it takes effect now."""
    problem = _check(sku)
    if problem:
        raise errors.invalid_argument(problem, "sku")
    sku = copy.deepcopy(sku)
    price = sku["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]["unitPrice"]
    price["currencyCode"] = "USD"
    price["units"] = str(price.get("units", "0"))
    sku["pricingInfo"][0]["effectiveTime"] = rfc3339(state.now())
    sku.setdefault("serviceProviderName", "Google")
    service = sku["name"].split("/")[1]
    sku["category"].setdefault("serviceDisplayName", table.SERVICES[service])
    state.billing.put(sku)
    state.changed()
    return sku


def delete_sku(state: Any, sku_id: str) -> dict[str, Any]:
    """Remove a SKU (404 if none has that skuId)."""
    state.billing.remove(sku_id)
    state.changed()
    return {"deleted": sku_id}
