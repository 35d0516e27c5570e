"""Read-only resources served from the emulator's own tables (offerings/): locations,
accelerator types and runtime versions. They hold no state, so they need neither the lock
nor the state file."""

from __future__ import annotations

from typing import Any

from tpuctl.emulator.core import errors
from tpuctl.emulator.offerings import runtimes, zones
from tpuctl.emulator.offerings.accelerators import AcceleratorType, parse_accelerator
from tpuctl.emulator.tpu.rules import check_zone, listing


def _location(project: str, zone: str) -> dict[str, Any]:
    return {
        "name": f"projects/{project}/locations/{zone}",
        "locationId": zone,
        "labels": {"region": zones.region_of(zone)},
    }


def list_locations(project: str, page_size: int = 0, page_token: str = "") -> dict[str, Any]:
    items = [_location(project, zone) for zone in sorted(zones.ZONES)]
    return listing("locations", items, page_size, page_token)


def get_location(project: str, zone: str) -> dict[str, Any]:
    check_zone(project, zone, "tpu.locations.get")
    return _location(project, zone)


def _accelerator_type(project: str, zone: str, acc: AcceleratorType) -> dict[str, Any]:
    return {
        "name": f"projects/{project}/locations/{zone}/acceleratorTypes/{acc.name}",
        "type": acc.name,
        "acceleratorConfigs": [{"type": acc.config_type, "topology": acc.topology}],
    }


def list_accelerator_types(
    project: str, zone: str, page_size: int = 0, page_token: str = ""
) -> dict[str, Any]:
    check_zone(project, zone, "tpu.acceleratortypes.list")
    items = [_accelerator_type(project, zone, acc) for acc in zones.accelerator_types(zone)]
    return listing("acceleratorTypes", items, page_size, page_token)


def get_accelerator_type(project: str, zone: str, name: str) -> dict[str, Any]:
    check_zone(project, zone, "tpu.acceleratortypes.get")
    acc = parse_accelerator(name)
    if acc is None or acc not in zones.accelerator_types(zone):
        raise errors.not_found(f"projects/{project}/locations/{zone}/acceleratorTypes/{name}")
    return _accelerator_type(project, zone, acc)


def _runtime_version(project: str, zone: str, version: str) -> dict[str, Any]:
    return {
        "name": f"projects/{project}/locations/{zone}/runtimeVersions/{version}",
        "version": version,
    }


def list_runtime_versions(
    project: str, zone: str, page_size: int = 0, page_token: str = ""
) -> dict[str, Any]:
    check_zone(project, zone, "tpu.runtimeversions.list")
    items = [_runtime_version(project, zone, v) for v in runtimes.runtime_versions(zone)]
    return listing("runtimeVersions", items, page_size, page_token)


def get_runtime_version(project: str, zone: str, version: str) -> dict[str, Any]:
    check_zone(project, zone, "tpu.runtimeversions.get")
    if version not in runtimes.runtime_versions(zone):
        raise errors.not_found(f"projects/{project}/locations/{zone}/runtimeVersions/{version}")
    return _runtime_version(project, zone, version)
