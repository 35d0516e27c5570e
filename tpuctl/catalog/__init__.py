"""What Cloud TPU offers: slice shapes (shapes.py), zones, runtime versions
and quotas.

Pure data and small functions, no heavy imports: the CLI reads it for defaults and
costs, and the emulator for the rules it enforces. Facts are from gcloud's TPU
messages, the Cloud TPU docs (https://cloud.google.com/tpu/docs/regions-zones,
https://cloud.google.com/tpu/docs/runtimes, https://cloud.google.com/tpu/pricing,
https://cloud.google.com/tpu/docs/quota) and public catalogs.
"""

from __future__ import annotations

from dataclasses import dataclass

# The slice shapes (what a name means, on both APIs) live in shapes.py; they are part of
# the catalogue.
from tpuctl.catalog.shapes import (  # noqa: F401
    ACCELERATOR_TYPES,
    API_DEFAULT_ACCELERATOR,
    DEFAULT_ACCELERATOR,
    GENERATIONS,
    SHAPES,
    TPU_API_GENERATIONS,
    AcceleratorType,
    SliceShape,
    accelerator_for_config,
    canonical_accelerator,
    parse_accelerator,
    shape,
)

# zone -> generations offered there (a representative subset of the real map)
ZONES: dict[str, list[str]] = {
    "us-central1-a": ["v3", "v5e", "v5p"],
    "us-central1-b": ["v2", "v3", "v6e"],
    "us-central1-c": ["v2"],
    "us-central1-f": ["v2", "v3"],
    "us-central2-b": ["v4"],
    "europe-west4-a": ["v2", "v3", "v6e"],
    "europe-west4-b": ["v5e", "v5p"],
    "us-east1-d": ["v6e"],
    "us-east5-a": ["v5e", "v5p", "v6e"],
    "us-east5-b": ["v5e", "v6e"],
    "us-east5-c": ["v5e"],
    "us-south1-a": ["v5e"],
    "us-west1-c": ["v5e"],
    "us-west4-a": ["v5e"],
    "asia-east1-c": ["v2"],
    "asia-northeast1-b": ["v6e"],
}
DEFAULT_ZONE = "us-central1-a"


def region_of(zone: str) -> str:
    """`us-central1-a` -> `us-central1`."""
    return zone.rsplit("-", 1)[0]


def accelerator_types(zone: str) -> list[SliceShape]:
    """Every accelerator type offered in `zone` (empty for an unknown zone)."""
    gens = ZONES.get(zone, [])
    return [acc for acc in ACCELERATOR_TYPES.values() if acc.generation in gens]


def zones_offering(generation: str) -> list[str]:
    """The zones where a generation is offered."""
    return [zone for zone, gens in ZONES.items() if generation in gens]


# Runtime version -> the generations it boots on. From the Cloud TPU software-versions
# page (https://cloud.google.com/tpu/docs/runtimes) and the defaults of Google's samples
# (`v2-tpuv5-litepod` is the default of python-docs-samples' v5e node and queued-resource
# samples); which older images run on which generation is not confirmed by a local source
# (contributing/emulator-fidelity.md says so). The emulator refuses a version on another generation.
# TensorFlow's PJRT images from 2.15 on boot every generation: "TPU v6e, v5e, and v5p
# support TensorFlow 2.15.0 and newer. You specify the TPU software version in the form
# tpu-vm-tf-x.y.z-{pod}-pjrt" (cloud.google.com/tpu/docs/runtimes), and
# python-docs-samples' tpu/ tests create `v5litepod-1` nodes with `tpu-vm-tf-2.17.0-pjrt`
# in us-south1-a (tpu/test_tpu.py).
_V23, _V234 = ("v2", "v3"), ("v2", "v3", "v4")
_PJRT = ("v2", "v3", "v4", "v5e", "v5p", "v6e")
RUNTIME_GENERATIONS: dict[str, tuple[str, ...]] = {
    "tpu-ubuntu2204-base": _V234,
    "tpu-vm-base": _V23,
    "tpu-vm-pt-2.0": _V23,
    "tpu-vm-tf-2.10.0": _V23,
    "tpu-vm-tf-2.10.0-pod": _V23,
    "tpu-vm-tf-2.10.0-v4": ("v4",),
    "tpu-vm-tf-2.10.0-pod-v4": ("v4",),
    "tpu-vm-tf-2.14.0": _V23,
    "tpu-vm-tf-2.14.0-pod": _V23,
    "tpu-vm-tf-2.15.0-pjrt": _PJRT,
    "tpu-vm-tf-2.15.0-pod-pjrt": _PJRT,
    "tpu-vm-tf-2.15.0-se": _V23,
    "tpu-vm-tf-2.15.0-pod-se": _V23,
    "tpu-vm-tf-2.16.0-pjrt": _PJRT,
    "tpu-vm-tf-2.16.0-pod-pjrt": _PJRT,
    "tpu-vm-tf-2.16.0-se": _V23,
    "tpu-vm-tf-2.16.0-pod-se": _V23,
    "tpu-vm-tf-2.17.0-pjrt": _PJRT,
    "tpu-vm-tf-2.17.0-pod-pjrt": _PJRT,
    "tpu-vm-tf-2.18.0-pjrt": _PJRT,
    "tpu-vm-tf-2.18.0-pod-pjrt": _PJRT,
    "v2-alpha": _V23,
    "v2-alpha-pod": _V23,
    "v2-alpha-tpuv4": ("v4",),
    "v2-alpha-tpuv4-pod": ("v4",),
    "v2-alpha-tpuv5-lite": ("v5e",),
    "v2-tpuv5-litepod": ("v5e",),
    "v2-alpha-tpuv5": ("v5p",),
    "v2-alpha-tpuv6e": ("v6e",),
}
RUNTIME_VERSIONS: list[str] = list(RUNTIME_GENERATIONS)


def runtime_versions(zone: str) -> list[str]:
    """The runtime versions offered in `zone`: those of the generations it offers."""
    gens = set(ZONES.get(zone, []))
    return [v for v, fits in RUNTIME_GENERATIONS.items() if gens & set(fits)]


_DEFAULT_RUNTIME = {
    "v2": "tpu-ubuntu2204-base",
    "v3": "tpu-ubuntu2204-base",
    "v4": "tpu-ubuntu2204-base",
    "v5e": "v2-alpha-tpuv5-lite",
    "v5p": "v2-alpha-tpuv5",
    "v6e": "v2-alpha-tpuv6e",
}


def default_runtime(generation: str) -> str:
    """The base image to use for a generation when the user names none."""
    return _DEFAULT_RUNTIME.get(generation, "tpu-ubuntu2204-base")


def runtime_for(accelerator: str) -> str:
    """The base image of an accelerator type's generation (`v4-8` -> tpu-ubuntu2204-base)."""
    acc = parse_accelerator(canonical_accelerator(accelerator))
    return default_runtime(acc.generation if acc else "v4")


# -- quotas ---------------------------------------------------------------------
# The TPU quotas of the Cloud Quotas API (service tpu.googleapis.com), per quota family
# and scheduling, per region and (for most families) per zone too: the emulator enforces
# and serves this table, and tpuctl reads the limits of these quota ids. Spot and
# preemptible nodes count against the preemptible quotas; reserved nodes against
# reservations, which are not listed here. Ids with seen=True appear in public sources;
# the others follow the same naming pattern (docs/quota.md gives each source).
QUOTA_SERVICE = "tpu.googleapis.com"
# States whose nodes no longer hold quota (the delete has been accepted).
QUOTA_FREE_STATES = frozenset({"DELETING"})


@dataclass(frozen=True)
class QuotaSpec:
    """One TPU quota: what it counts (chips or TensorCores), per region or per zone.

    A family's quota may exist per region and per zone at once (`...PerProjectPerRegion...`
    and `...PerProjectPerZone...`); the cloud checks both and the tightest refuses. The
    `primary` one is the id tpuctl has always named (and asks more of); the other is its
    twin. `seen` says whether a public source shows the id (docs/quota.md names it) or
    the id is inferred from the naming pattern.
    """

    quota_id: str
    family: str  # "v2", "v2 pod", "v3", "v3 pod", "v4", "v5e", "v5e serving", "v5p", "v6e"
    preemptible: bool
    metric: str
    unit: str  # "chips" or "cores" (TensorCores)
    dimension: str  # "region" or "zone"
    new_project: int  # the limit a new project starts with
    granted: int  # the limit in the emulator's default project, which has been granted quota
    primary: bool = True
    seen: bool = False

    @property
    def scheduling(self) -> str:
        return "preemptible" if self.preemptible else "on-demand"

    def amount(self, acc: SliceShape) -> int:
        """How much of this quota one `acc` slice uses."""
        return acc.chips if self.unit == "chips" else acc.cores

    def location(self, zone: str) -> str:
        """The region or zone whose limit a node in `zone` counts against."""
        return zone if self.dimension == "zone" else region_of(zone)

    @property
    def display_name(self) -> str:
        kind = "preemptible " if self.preemptible else ""
        return f"TPU {self.family} {kind}{self.unit} per project per {self.dimension}"


_M = "tpu.googleapis.com/"
_ZONE, _REGION = "zone", "region"


def _family(
    family: str,
    unit: str,
    metric: str,
    limits: tuple[int, int, int, int],
    *ids: tuple[str, str, bool],
) -> tuple[QuotaSpec, ...]:
    """The quotas of one family. `limits` are (on-demand new, on-demand granted,
    preemptible new, preemptible granted); each id is (quota id, dimension, seen), the
    first of each scheduling its primary. A twin starts at the granted value in both
    presets: a new project's limit is then its primary's (see docs/quota.md)."""
    out: list[QuotaSpec] = []
    for quota_id, dimension, seen in ids:
        preemptible = "Preemptible" in quota_id
        primary = not any(q.preemptible == preemptible for q in out)
        new, granted = limits[2:] if preemptible else limits[:2]
        out.append(
            QuotaSpec(
                quota_id,
                family,
                preemptible,
                _M + metric + ("-preemptible" if preemptible else ""),
                unit,
                dimension,
                new if primary else granted,
                granted,
                primary,
                seen,
            )
        )
    return tuple(out)


# Sources for every id, and which are only inferred, are in docs/quota.md.
QUOTAS: tuple[QuotaSpec, ...] = (
    *_family(
        "v2",
        "cores",
        "tpu-v2",
        (16, 128, 48, 1024),
        ("TPUV2sPerProjectPerZoneForTPUAPI", _ZONE, False),
        ("TPUV2sPreemptiblePerProjectPerZoneForTPUAPI", _ZONE, False),
    ),
    *_family(
        "v2 pod",
        "cores",
        "tpu-v2-pod",
        (0, 512, 0, 2048),
        ("TPUV2sPodPerProjectPerRegionForTPUAPI", _REGION, True),
        ("TPUV2sPreemptiblePodPerProjectPerRegionForTPUAPI", _REGION, False),
        ("TPUV2sPodPerProjectPerZoneForTPUAPI", _ZONE, True),
        ("TPUV2sPreemptiblePodPerProjectPerZoneForTPUAPI", _ZONE, False),
    ),
    *_family(
        "v3",
        "cores",
        "tpu-v3",
        (16, 128, 48, 1024),
        ("TPUV3sPerProjectPerZoneForTPUAPI", _ZONE, False),
        ("TPUV3sPreemptiblePerProjectPerZoneForTPUAPI", _ZONE, False),
    ),
    *_family(
        "v3 pod",
        "cores",
        "tpu-v3-pod",
        (0, 512, 0, 2048),
        ("TPUV3sPodPerProjectPerRegionForTPUAPI", _REGION, False),
        ("TPUV3sPreemptiblePodPerProjectPerRegionForTPUAPI", _REGION, False),
        ("TPUV3sPodPerProjectPerZoneForTPUAPI", _ZONE, False),
        ("TPUV3sPreemptiblePodPerProjectPerZoneForTPUAPI", _ZONE, False),
    ),
    *_family(
        "v4",
        "chips",
        "tpu-v4",
        (0, 512, 0, 2048),
        ("TPUV4sPodPerProjectPerRegionForTPUAPI", _REGION, False),
        ("TPUV4sPreemptiblePodPerProjectPerRegionForTPUAPI", _REGION, True),
        ("TPUV4sPodPerProjectPerZoneForTPUAPI", _ZONE, False),
        ("TPUV4sPreemptiblePodPerProjectPerZoneForTPUAPI", _ZONE, True),
    ),
    *_family(
        "v5e",
        "chips",
        "tpu-v5s-litepod",
        (0, 256, 0, 1024),
        ("TPUV5sLitepodPerProjectPerRegionForTPUAPI", _REGION, True),
        ("TPUV5sPreemptibleLitepodPerProjectPerRegionForTPUAPI", _REGION, True),
        ("TPUV5sLitepodPerProjectPerZoneForTPUAPI", _ZONE, True),
        ("TPUV5sPreemptibleLitepodPerProjectPerZoneForTPUAPI", _ZONE, True),
    ),
    *_family(
        "v5e serving",
        "chips",
        "tpu-v5s-litepod-serving",
        (0, 64, 0, 256),
        ("TPUV5sLitepodServingPerProjectPerZoneForTPUAPI", _ZONE, True),
        ("TPUV5sPreemptibleLitepodServingPerProjectPerZoneForTPUAPI", _ZONE, True),
    ),
    *_family(
        "v5p",
        "cores",
        "tpu-v5p",
        (0, 1024, 0, 4096),
        ("TPUV5PPerProjectPerZoneForTPUAPI", _ZONE, True),
        ("TPUV5PPreemptiblePerProjectPerZoneForTPUAPI", _ZONE, True),
        ("TPUV5PPerProjectPerRegionForTPUAPI", _REGION, True),
        ("TPUV5PPreemptiblePerProjectPerRegionForTPUAPI", _REGION, False),
    ),
    *_family(
        "v6e",
        "chips",
        "tpu-v6e",
        (0, 256, 0, 1024),
        ("TPUV6EPerProjectPerRegionForTPUAPI", _REGION, True),
        ("TPUV6EPreemptiblePerProjectPerRegionForTPUAPI", _REGION, True),
        ("TPUV6EPerProjectPerZoneForTPUAPI", _ZONE, True),
        ("TPUV6EPreemptiblePerProjectPerZoneForTPUAPI", _ZONE, True),
    ),
)
QUOTAS_BY_ID: dict[str, QuotaSpec] = {q.quota_id: q for q in QUOTAS}
QUOTA_FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(q.family for q in QUOTAS))
# Metrics the Cloud TPU quota docs name with no quota id tpuctl has found: reserved TPUs
# draw on reservations (https://cloud.google.com/tpu/docs/quota), not counted here.
RESERVED_METRICS: tuple[str, ...] = (_M + "tpu-v5s-litepod-serving-reserved",)


def quota_family(acc: SliceShape) -> str:
    """The quota family a slice counts against (`SliceShape.quota_family`)."""
    return acc.quota_family


def quotas_for(acc: SliceShape, scheduling: str) -> tuple[QuotaSpec, ...]:
    """Every quota a create of `acc` counts against (primary first, then its twin in the
    other dimension); scheduling is on-demand, spot, preemptible or reserved (reserved
    capacity is not counted here: empty)."""
    if scheduling == "reserved":
        return ()
    preemptible = scheduling in ("spot", "preemptible")
    family = quota_family(acc)
    specs = [q for q in QUOTAS if q.family == family and q.preemptible == preemptible]
    return tuple(sorted(specs, key=lambda q: not q.primary))


def quota_for(acc: SliceShape, scheduling: str) -> QuotaSpec | None:
    """The primary quota a create of `acc` counts against (None for reserved)."""
    specs = quotas_for(acc, scheduling)
    return specs[0] if specs else None


def regions() -> list[str]:
    """Every region with a zone in ZONES, in order."""
    return sorted({region_of(z) for z in ZONES})


def zones_in(region: str) -> list[str]:
    return sorted(z for z in ZONES if region_of(z) == region)


def scheduling_name(spot: bool = False, preemptible: bool = False, reserved: bool = False) -> str:
    """A node's scheduling as quota sees it: reserved, spot, preemptible or on-demand."""
    if reserved:
        return "reserved"
    return "spot" if spot else "preemptible" if preemptible else "on-demand"
