"""The zones the emulated Cloud TPU API serves and the generations each offers: a
representative subset of Google's "TPU regions and zones" page
(https://cloud.google.com/tpu/docs/regions-zones). A zone outside this table is refused
as the real service refuses one (tpu/rules.py, `check_zone`).
"""

from __future__ import annotations

from tpuctl.emulator.offerings.accelerators import ACCELERATOR_TYPES, AcceleratorType

# zone -> the TPU API generations offered there
ZONES: dict[str, tuple[str, ...]] = {
    "us-central1-a": ("v3", "v5e", "v5p"),
    "us-central1-b": ("v2", "v3", "v6e"),
    "us-central1-c": ("v2",),
    "us-central1-f": ("v2", "v3"),
    "us-central2-b": ("v4",),  # v4 is offered in us-central2-b only
    "europe-west4-a": ("v2", "v3", "v6e"),
    "europe-west4-b": ("v5e", "v5p"),
    "us-east1-d": ("v6e",),
    "us-east5-a": ("v5e", "v5p", "v6e"),
    "us-east5-b": ("v5e", "v6e"),
    "us-east5-c": ("v5e",),
    "us-south1-a": ("v5e",),
    "us-west1-c": ("v5e",),
    "us-west4-a": ("v5e",),
    "asia-east1-c": ("v2",),
    "asia-northeast1-b": ("v6e",),
}


def region_of(zone: str) -> str:
    """`us-central1-a` -> `us-central1` (a zone's name is its region's and a letter)."""
    return zone.rsplit("-", 1)[0]


def regions() -> list[str]:
    """Every region with a zone in ZONES, sorted."""
    return sorted({region_of(zone) for zone in ZONES})


def generations(zone: str) -> tuple[str, ...]:
    """The generations `zone` offers (none for a zone not served)."""
    return ZONES.get(zone, ())


def accelerator_types(zone: str) -> list[AcceleratorType]:
    """Every TPU API accelerator type offered in `zone`."""
    offered = generations(zone)
    return [acc for acc in ACCELERATOR_TYPES.values() if acc.generation in offered]
