"""The catalogue turns what the user typed into one slice shape, for both TPU APIs."""

from __future__ import annotations

import pytest

from tpuctl import catalog
from tpuctl.catalog import SliceShape, shape
from tpuctl.cloud import registry


@pytest.mark.parametrize(
    ("typed", "name", "chips", "cores", "hosts", "topology", "tpu_type", "machine"),
    [
        ("v4-32", "v4-32", 16, 32, 4, "2x2x4", "v4-32", None),
        ("V5E-8", "v5litepod-8", 8, 8, 1, "2x4", "v5litepod-8", None),
        ("v5litepod-16", "v5litepod-16", 16, 16, 4, "4x4", "v5litepod-16", None),
        ("v6e-1", "v6e-1", 1, 1, 1, "1x1", "v6e-1", "ct6e-standard-1t"),
        ("v6e-8", "v6e-8", 8, 8, 1, "2x4", "v6e-8", "ct6e-standard-8t"),
        ("v6e-16", "v6e-16", 16, 16, 4, "4x4", "v6e-16", "ct6e-standard-4t"),
        ("v5p-8", "v5p-8", 4, 8, 1, "2x2x1", "v5p-8", "ct5p-hightpu-4t"),
        ("v5p-32", "v5p-32", 16, 32, 4, "2x2x4", "v5p-32", "ct5p-hightpu-4t"),
        ("tpu7x-8", "tpu7x-8", 4, 8, 1, "2x2x1", None, "tpu7x-standard-4t"),
        ("tpu7x-16", "tpu7x-16", 8, 16, 2, "2x2x2", None, "tpu7x-standard-4t"),
        (" v7x-16 ", "tpu7x-16", 8, 16, 2, "2x2x2", None, "tpu7x-standard-4t"),  # the VM's spelling
        ("tpu7x-128", "tpu7x-128", 64, 128, 16, "4x4x4", None, "tpu7x-standard-4t"),
    ],
)
def test_a_name_resolves_to_its_shape(
    typed: str,
    name: str,
    chips: int,
    cores: int,
    hosts: int,
    topology: str,
    tpu_type: str | None,
    machine: str | None,
) -> None:
    got = shape(typed)
    assert (got.name, got.chips, got.cores, got.hosts, got.topology) == (
        name,
        chips,
        cores,
        hosts,
        topology,
    )
    assert (got.tpu_type, got.machine_type, got.known) == (tpu_type, machine, True)
    assert got.chips_per_host * got.hosts == got.chips


def _apis(name: str) -> list[str]:
    return [k.key for k in registry.offering(shape(name))]


def test_which_api_offers_what() -> None:
    assert _apis("v4-8") == ["tpu"]
    assert _apis("v5litepod-4") == ["tpu"]  # Compute Engine offers no v5e
    assert _apis("v6e-16") == ["tpu", "compute"]
    assert _apis("v5p-16") == ["tpu", "compute"]
    assert _apis("tpu7x-16") == ["compute"]  # only Compute Engine, never the TPU API
    assert "tpu7x-16" not in catalog.ACCELERATOR_TYPES  # so the emulated TPU API lists none


def test_an_unknown_name_is_left_for_the_api_to_judge() -> None:
    got = shape("V9-8")
    assert got == SliceShape.unknown("v9-8")
    assert (got.known, got.tpu_type, _apis("V9-8"), got.hosts, got.generation) == (
        False,
        "v9-8",
        ["tpu"],
        1,
        "",
    )
    assert catalog.quotas_for(got, "on-demand") == ()


@pytest.mark.parametrize(
    ("typed", "family"),
    [("v2-8", "v2"), ("v3-32", "v3 pod"), ("v5litepod-8", "v5e serving"), ("v5e-16", "v5e"),
     ("v6e-4", "v6e"), ("v5p-8", "v5p"), ("tpu7x-8", "tpu7x")],
)  # fmt: skip
def test_the_quota_family_and_price_key_come_with_the_shape(typed: str, family: str) -> None:
    got = shape(typed)
    assert got.quota_family == family
    assert got.price_key == got.generation


def test_every_shape_of_the_tpu_api_has_its_topology_for_the_config_form() -> None:
    for acc in catalog.ACCELERATOR_TYPES.values():
        assert catalog.accelerator_for_config(acc.config_type, acc.topology) is not None
        assert acc.cores == (acc.chips if acc.generation in ("v5e", "v6e") else 2 * acc.chips)
