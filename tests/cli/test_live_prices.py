"""Prices come from the cloud's own catalog (the Cloud Billing Catalog API the emulator
serves), with their date; a changed SKU reaches tpuctl on --refresh or once the cached
copy is a day old; a catalog that cannot be read gives tpuctl's built-in table, said
in one line; TPU7x shows "no public price" until the catalog has one; a stopped node's
cost so far stays where it was."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

V3_US = "095E-FAB3-9F38"  # the emulator's Tpu-v3 Device SKU in us-central1
ZONE = "us-central1-a"
REGION = "us-central1"


def _sku(sku_id: str, service: str, description: str, usd: float, regions: list[str]) -> dict:
    units, nanos = int(usd), round((usd - int(usd)) * 1e9)
    return {
        "name": f"services/{service}/skus/{sku_id}",
        "skuId": sku_id,
        "description": description,
        "category": {
            "serviceDisplayName": "Compute Engine",
            "resourceFamily": "Compute",
            "resourceGroup": "TPU",
            "usageType": "OnDemand",
        },
        "serviceRegions": regions,
        "pricingInfo": [
            {
                "summary": "",
                "pricingExpression": {
                    "usageUnit": "h",
                    "usageUnitDescription": "hour",
                    "baseUnit": "s",
                    "baseUnitDescription": "second",
                    "baseUnitConversionFactor": 3600,
                    "displayQuantity": 1,
                    "tieredRates": [
                        {
                            "startUsageAmount": 0,
                            "unitPrice": {
                                "currencyCode": "USD",
                                "units": str(units),
                                "nanos": nanos,
                            },
                        }
                    ],
                },
                "currencyConversionRate": 1,
                "effectiveTime": "2026-12-01T08:00:00Z",
            }
        ],
        "serviceProviderName": "Google",
    }


def _price(cli: Any, accelerator: str, *more: str) -> dict[str, Any]:
    r = cli("prices", accelerator, "--region", "us-central1", "--json", *more)
    assert r.code == 0, r.err
    (row,) = json.loads(r.out)["prices"]
    return row


def test_create_and_list_show_the_catalogs_price_with_its_date(cli, emulator) -> None:
    r = cli("create", "priced", "-a", "v3-8", "--zone", ZONE)
    assert r.code == 0, r.err
    # a v3-8 is 4 chips at the catalog's 2.00 a chip-hour in us-central1
    assert "v3-8 on-demand in us-central1: about $8.00/h" in r.err
    assert "Cloud Billing prices of 2026-11-01" in r.err
    r = cli("list", "--zone", ZONE)
    assert "Cloud Billing prices of 2026-11-01" in r.err
    assert "built-in table" not in r.err
    assert cli("delete", "priced", "--zone", ZONE, "--yes").code == 0


def test_a_changed_sku_reaches_tpuctl_on_refresh_or_a_day_later(cli, emulator) -> None:
    assert _price(cli, "v3-8")["onDemandUsd"] == 8.0
    # v3 SKUs are priced per 8 TensorCores: one v3-8 device
    new = _sku(V3_US, "E000-3F24-B8AA", "Tpu-v3 Device running in Iowa", 10.0, [REGION])
    emulator.call("POST", "billing/skus", {"sku": new})
    assert _price(cli, "v3-8")["onDemandUsd"] == 8.0  # the copy read today still holds
    fresh = _price(cli, "v3-8", "--refresh")
    assert fresh["onDemandUsd"] == 10.0
    assert fresh["sku"] == V3_US
    assert fresh["source"] == f"Cloud Billing {time.strftime('%Y-%m-%d', time.gmtime())}"
    assert _price(cli, "v3-8")["onDemandUsd"] == 10.0  # and is kept
    # a day later, any command reads the catalog again
    later = _sku(V3_US, "E000-3F24-B8AA", "Tpu-v3 Device running in Iowa", 12.0, [REGION])
    emulator.call("POST", "billing/skus", {"sku": later})
    (cache,) = Path(os.environ["TPUCTL_CACHE_DIR"]).glob("prices-*.json")
    saved = json.loads(cache.read_text())
    saved["fetched"] -= 25 * 3600
    cache.write_text(json.dumps(saved))
    assert _price(cli, "v3-8")["onDemandUsd"] == 12.0


def test_a_catalog_that_cannot_be_read_gives_the_built_in_table_said_once(cli, emulator) -> None:
    emulator.config(billing_catalog="forbidden")
    r = cli("prices", "v6e-8", "--region", "us-east5")
    assert r.code == 0, r.err
    assert "$21.60" in r.out  # the built-in table's 2.70 a chip-hour, 8 chips
    lines = [ln for ln in r.err.splitlines() if "built-in table of 2026-12" in ln]
    assert len(lines) == 1, r.err
    assert "(Cloud Billing not readable: " in lines[0]
    # not asked again within the hour: the reason is kept with the cache
    emulator.config(billing_catalog="ok")
    r = cli("prices", "v6e-8", "--region", "us-east5")
    assert "built-in table of 2026-12" in r.err
    assert "Cloud Billing prices" in cli("prices", "v6e-8", "--refresh").err


def test_tpu7x_has_no_public_price_until_the_catalog_has_one(cli, emulator) -> None:
    r = cli("prices", "tpu7x-8", "--json")
    assert json.loads(r.out)["noPublicPrice"] == ["tpu7x"]
    r = cli("prices", "tpu7x-8")
    assert r.err.count("no public price for tpu7x") == 1
    assert "-" not in r.out.strip()  # no stray dash that reads like a zero
    sku = _sku(
        "7A7A-0000-7A7A", "6F81-5844-456A", "Tpu7x running in Americas", 5.0, ["us-central1"]
    )
    emulator.call("POST", "billing/skus", {"sku": sku})
    row = _price(cli, "tpu7x-8", "--refresh")
    assert row["onDemandUsd"] == 20.0  # priced per chip: 4 chips at 5.00
    assert row["spotUsd"] is None  # no spot SKU: not known, never guessed


def test_a_stopped_nodes_cost_so_far_stays_flat(cli, emulator) -> None:
    assert cli("create", "flat", "-a", "v3-8", "--zone", ZONE).code == 0

    def listed() -> dict[str, Any]:
        r = cli("list", "--zone", ZONE, "--json")
        assert r.code == 0, r.err
        (node,) = json.loads(r.out)
        return node

    running = [listed()["costSoFarUsd"] for _ in range(2)]
    assert running[1] > running[0]  # a running node's cost grows
    assert cli("stop", "flat", "--zone", ZONE).code == 0
    stopped = [listed() for _ in range(2)]
    assert stopped[0]["hourlyUsd"] == 0.0
    assert stopped[0]["costSoFarUsd"] == stopped[1]["costSoFarUsd"]
    assert stopped[0]["costSoFarUsd"] >= running[1]
    assert "tpuctl-ran" in stopped[0]["labels"]
    assert cli("start", "flat", "--zone", ZONE).code == 0
    assert listed()["costSoFarUsd"] >= stopped[0]["costSoFarUsd"]
    assert cli("delete", "flat", "--zone", ZONE, "--yes").code == 0
