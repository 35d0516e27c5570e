"""Which Cloud Billing SKUs are TPU rates, and at what price per chip-hour."""

from __future__ import annotations

from typing import Any

import pytest

from tpuctl.cloud.billing import generation_of, rate_of


def sku(description: str, usd: str, usage: str = "OnDemand", unit: str = "h", **more: Any) -> dict:
    units, _, frac = usd.partition(".")
    nanos = int((frac + "000000000")[:9])
    return {
        "skuId": "AAAA-BBBB-CCCC",
        "description": description,
        "category": {"resourceFamily": "Compute", "resourceGroup": "TPU", "usageType": usage},
        "serviceRegions": ["us-central1"],
        "pricingInfo": [
            {
                "effectiveTime": "2026-11-01T08:00:00Z",
                "pricingExpression": {
                    "usageUnit": unit,
                    "displayQuantity": 1,
                    "tieredRates": [{"unitPrice": {"units": units, "nanos": nanos}}],
                },
            }
        ],
        **more,
    }


@pytest.mark.parametrize(
    ("description", "generation"),
    [
        ("Tpu-v2 Device running in Iowa", "v2"),
        ("Preemptible Tpu-v3 Pod running in Netherlands", "v3"),
        ("TpuV5e running in Americas", "v5e"),
        ("Tpu v6e running in Tokyo", "v6e"),
        ("Tpu7x running in Americas", "tpu7x"),
        ("N2 Instance Core running in Americas", None),
    ],
)
def test_the_generation_comes_from_the_description(description: str, generation: str) -> None:
    assert generation_of(description) == generation


def test_v2_and_v3_are_priced_per_device_and_later_generations_per_chip() -> None:
    v3 = rate_of(sku("Tpu-v3 Device running in Iowa", "8.00"))
    assert v3 is not None and v3.usd_per_chip_hour == pytest.approx(2.0) and not v3.pod
    pod = rate_of(sku("Tpu-v3 Pod running in Iowa", "8.00"))
    assert pod is not None and pod.pod
    v6e = rate_of(sku("TpuV6e running in Americas", "2.70"))
    assert v6e is not None and v6e.usd_per_chip_hour == pytest.approx(2.70)
    assert v6e.effective == "2026-11-01T08:00:00Z" and v6e.regions == ("us-central1",)


def test_spot_is_told_by_preemptible_even_where_the_usage_type_says_on_demand() -> None:
    spot = rate_of(sku("Preemptible Tpu-v2 Device running in Iowa", "1.35"))
    assert spot is not None and spot.spot and spot.usd_per_chip_hour == pytest.approx(0.3375)


@pytest.mark.parametrize(
    "left_out",
    [
        sku("Commitment v1: TpuV6e in Americas for 1 Year", "1.89", usage="Commit1Yr"),
        sku("TpuV6e Reserved running in Americas", "2.0"),
        sku("TpuV6e DWS Flex Start running in Americas", "1.0"),
        sku("TpuV6e running in Americas", "2.7", unit="mo"),  # not per hour
        {
            **sku("N2 Instance Core running in Americas", "0.03"),
            "category": {"usageType": "OnDemand"},
        },
        sku("TpuV6e running in Americas", "2.7", pricingInfo=[]),
    ],
)
def test_other_skus_are_no_rate(left_out: dict) -> None:
    assert rate_of(left_out) is None
