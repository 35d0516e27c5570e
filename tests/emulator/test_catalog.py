"""tpuctl.catalog: accelerator types, zones, runtimes and prices."""

from __future__ import annotations

import pytest

from tpuctl import catalog


@pytest.mark.parametrize(
    ("name", "generation", "chips", "workers", "config_type", "topology"),
    [
        ("v2-8", "v2", 4, 1, "V2", "2x2"),
        ("v2-32", "v2", 16, 4, "V2", "4x4"),
        ("v3-8", "v3", 4, 1, "V3", "2x2"),
        ("v4-8", "v4", 4, 1, "V4", "2x2x1"),
        ("v4-32", "v4", 16, 4, "V4", "2x2x4"),
        ("v4-64", "v4", 32, 8, "V4", "2x4x4"),
        ("v5litepod-1", "v5e", 1, 1, "V5LITE_POD", "1x1"),
        ("v5litepod-8", "v5e", 8, 1, "V5LITE_POD", "2x4"),
        ("v5litepod-16", "v5e", 16, 4, "V5LITE_POD", "4x4"),
        ("v5p-16", "v5p", 8, 2, "V5P", "2x2x2"),
        ("v6e-8", "v6e", 8, 1, "V6E", "2x4"),
        ("v6e-16", "v6e", 16, 4, "V6E", "4x4"),
        ("v6e-32", "v6e", 32, 8, "V6E", "4x8"),
        ("v6e-256", "v6e", 256, 64, "V6E", "16x16"),
    ],
)
def test_parse_accelerator(
    name: str, generation: str, chips: int, workers: int, config_type: str, topology: str
) -> None:
    acc = catalog.parse_accelerator(name)
    assert acc is not None
    assert (acc.name, acc.generation, acc.chips, acc.workers) == (name, generation, chips, workers)
    assert (acc.config_type, acc.topology) == (config_type, topology)
    assert acc.size == int(name.rsplit("-", 1)[1])
    assert acc.multi_host == (workers > 1)


@pytest.mark.parametrize("name", ["", "v4-7", "v2-16", "v5e-8", "V4-8", "v4", "tpu-v4-8", "v6e-2"])
def test_parse_rejects_what_is_not_a_type(name: str) -> None:
    assert catalog.parse_accelerator(name) is None


def test_cores_count_tensorcores() -> None:
    assert catalog.parse_accelerator("v3-32").cores == 32  # type: ignore[union-attr]
    assert catalog.parse_accelerator("v5litepod-16").cores == 16  # type: ignore[union-attr]


def test_zones_offer_their_generations() -> None:
    for zone in ("us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f",
                 "us-central2-b", "europe-west4-a", "europe-west4-b", "us-east1-d",
                 "us-east5-a", "us-east5-b", "us-south1-a", "us-west1-c", "us-west4-a",
                 "asia-east1-c"):  # fmt: skip
        assert catalog.accelerator_types(zone), zone
    v4 = {a.name for a in catalog.accelerator_types("us-central2-b")}
    assert "v4-8" in v4 and "v4-4096" in v4
    assert all(name.startswith("v4-") for name in v4)
    assert "v5litepod-16" in {a.name for a in catalog.accelerator_types("us-west4-a")}
    assert catalog.accelerator_types("mars-north1-a") == []
    assert catalog.zones_offering("v4") == ["us-central2-b"]


def test_region_of() -> None:
    assert catalog.region_of("us-central1-a") == "us-central1"
    assert catalog.region_of("europe-west4-b") == "europe-west4"


def test_runtime_defaults_exist() -> None:
    assert catalog.default_runtime("v4") == "tpu-ubuntu2204-base"
    assert catalog.default_runtime("v5e") == "v2-alpha-tpuv5-lite"
    assert catalog.default_runtime("v5p") == "v2-alpha-tpuv5"
    assert catalog.default_runtime("v6e") == "v2-alpha-tpuv6e"
    for gen in catalog.GENERATIONS:
        assert catalog.default_runtime(gen) in catalog.RUNTIME_VERSIONS
    assert "tpu-vm-tf-2.16.0-pod-pjrt" in catalog.RUNTIME_VERSIONS
