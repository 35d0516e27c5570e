"""tpuctl's catalogue and the emulator's own tables of what the cloud offers agree
wherever both speak.

The two are written apart (tpuctl/catalog/ for the client, tpuctl/emulator/offerings/
and the emulator's compute/catalog.py for the emulated cloud), so that a wrong row on
one side is caught here rather than mirrored by the other. Each test compares one table
as two mappings and fails with every key whose rows differ, or that only one side has.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from tpuctl import catalog, frameworks, google_apis
from tpuctl.emulator.compute import catalog as compute_catalog
from tpuctl.emulator.offerings import accelerators, apis, quotas, runtimes, zones


def differences(table: str, client: Mapping[str, Any], emulator: Mapping[str, Any]) -> list[str]:
    """One line per key where the two sides of `table` differ (or only one has it)."""
    lines = []
    for key in sorted(set(client) | set(emulator), key=str):
        if key not in emulator:
            lines.append(f"{table}[{key!r}]: client {client[key]!r}, emulator has none")
        elif key not in client:
            lines.append(f"{table}[{key!r}]: emulator {emulator[key]!r}, client has none")
        elif client[key] != emulator[key]:
            lines.append(f"{table}[{key!r}]: client {client[key]!r} != emulator {emulator[key]!r}")
    return lines


def assert_agree(table: str, client: Mapping[str, Any], emulator: Mapping[str, Any]) -> None:
    found = differences(table, client, emulator)
    assert not found, "tpuctl's catalogue and the emulator's tables disagree:\n" + "\n".join(found)


def _machine_type(acc: accelerators.AcceleratorType) -> str | None:
    """The machine type whose VMs make `acc` in the emulator's Compute Engine."""
    return next(
        (m for m in compute_catalog.MACHINE_TYPES if compute_catalog.slice_of(m, acc.hosts) == acc),
        None,
    )


def test_the_slices_agree() -> None:
    """Every slice of either side, with its chips, TensorCores, hosts, topology, TPU API
    config type, and the machine type of its VMs on Compute Engine."""
    client = {
        s.name: (s.generation, s.chips, s.cores, s.hosts, s.topology, s.config_type)
        + (s.tpu_type is not None, s.machine_type)
        for s in catalog.SHAPES.values()
    }
    emulator = {
        a.name: (a.generation, a.chips, a.cores, a.hosts, a.topology, a.config_type)
        + (a.on_tpu_api, _machine_type(a))
        for a in accelerators.SLICES.values()
    }
    assert_agree("slices", client, emulator)
    assert set(catalog.GENERATIONS) == set(accelerators.GENERATIONS)


def test_the_tpu_apis_types_and_default_agree() -> None:
    assert_agree(
        "accelerator types",
        {name: s.name for name, s in catalog.ACCELERATOR_TYPES.items()},
        {name: a.name for name, a in accelerators.ACCELERATOR_TYPES.items()},
    )
    assert catalog.API_DEFAULT_ACCELERATOR == accelerators.API_DEFAULT_ACCELERATOR
    configs = {(s.config_type, s.topology): s.name for s in catalog.ACCELERATOR_TYPES.values()}
    found = {key: accelerators.accelerator_for_config(*key) for key in configs}
    assert_agree("acceleratorConfig", configs, {k: a.name for k, a in found.items() if a})


def test_the_zones_agree() -> None:
    assert_agree(
        "zones",
        {zone: tuple(gens) for zone, gens in catalog.ZONES.items()},
        dict(zones.ZONES),
    )
    assert catalog.regions() == zones.regions()
    types = {z: [s.name for s in catalog.accelerator_types(z)] for z in catalog.ZONES}
    assert_agree(
        "types per zone", types, {z: [a.name for a in zones.accelerator_types(z)] for z in types}
    )


def test_the_runtime_versions_agree() -> None:
    assert_agree("runtime versions", catalog.RUNTIME_GENERATIONS, runtimes.RUNTIMES)
    assert_agree(
        "runtime versions per zone",
        {z: catalog.runtime_versions(z) for z in catalog.ZONES},
        {z: runtimes.runtime_versions(z) for z in zones.ZONES},
    )
    assert_agree(
        "what each image carries",
        {v: frameworks.distributions(v) for v in catalog.RUNTIME_VERSIONS},
        {v: runtimes.distributions(v) for v in runtimes.RUNTIMES},
    )


def _quota_row(q: catalog.QuotaSpec | quotas.QuotaSpec) -> tuple[Any, ...]:
    return (q.family, q.preemptible, q.metric, q.unit, q.dimension, q.new_project, q.granted)


def test_the_quotas_agree() -> None:
    assert catalog.QUOTA_SERVICE == quotas.SERVICE
    assert catalog.QUOTA_FREE_STATES == quotas.FREE_STATES
    client = {q.quota_id: (*_quota_row(q), q.primary, q.display_name) for q in catalog.QUOTAS}
    emulator = {q.quota_id: (*_quota_row(q), q.primary, q.display_name) for q in quotas.QUOTAS}
    assert_agree("quotas", client, emulator)
    # which quotas a slice counts against, for every scheduling
    kinds = ("on-demand", "spot", "preemptible", "reserved")
    assert_agree(
        "quotas of a slice",
        {
            (s.name, k): [q.quota_id for q in catalog.quotas_for(s, k)]
            for s in catalog.ACCELERATOR_TYPES.values()
            for k in kinds
        },
        {
            (a.name, k): [q.quota_id for q in quotas.quotas_for(a, k)]
            for a in accelerators.ACCELERATOR_TYPES.values()
            for k in kinds
        },
    )


def test_the_apis_titles_agree_where_both_name_one() -> None:
    both = set(google_apis.TITLES) & set(apis.TITLES)
    assert {apis.TPU, apis.STORAGE, apis.QUOTAS, apis.COMPUTE} <= both
    assert_agree(
        "API titles",
        {s: google_apis.TITLES[s] for s in both},
        {s: apis.TITLES[s] for s in both},
    )


# -- the check itself -----------------------------------------------------------------
def test_a_difference_is_named_row_by_row() -> None:
    client = {"v4-8": ("v4", 4), "v4-16": ("v4", 8), "v9-8": ("v9", 4)}
    emulator = {"v4-8": ("v4", 4), "v4-16": ("v4", 16), "v5p-8": ("v5p", 4)}
    assert differences("slices", client, emulator) == [
        "slices['v4-16']: client ('v4', 8) != emulator ('v4', 16)",
        "slices['v5p-8']: emulator ('v5p', 4), client has none",
        "slices['v9-8']: client ('v9', 4), emulator has none",
    ]
    assert differences("slices", client, dict(client)) == []


def test_a_drifted_table_fails_with_its_difference(monkeypatch: pytest.MonkeyPatch) -> None:
    """A zone the client's catalogue gained and the emulator's tables lack fails the
    zones' test, naming that zone."""
    monkeypatch.setitem(catalog.ZONES, "us-west9-z", ["v6e"])
    with pytest.raises(AssertionError, match=r"zones\['us-west9-z'\]: client \('v6e',\)"):
        test_the_zones_agree()
