"""What Cloud TPU offers: accelerator types, zones, runtime versions and list prices.

Pure data and small functions, no heavy imports: the CLI reads it for defaults and
costs, and the emulator for the rules it enforces. Facts are from gcloud's TPU
messages, the Cloud TPU docs and public catalogs (see shared/reference/tpu-facts.md).
"""

from __future__ import annotations

from dataclasses import dataclass

# generation -> (name prefix, acceleratorConfig.type, sizes offered)
_GENERATIONS: dict[str, tuple[str, str, tuple[int, ...]]] = {
    "v2": ("v2-", "V2", (8, 32, 128, 256, 512)),
    "v3": ("v3-", "V3", (8, 32, 64, 128, 256, 512, 1024, 2048)),
    "v4": ("v4-", "V4", (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)),
    "v5e": ("v5litepod-", "V5LITE_POD", (1, 4, 8, 16, 32, 64, 128, 256)),
    "v5p": ("v5p-", "V5P", (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 12288)),
    "v6e": ("v6e-", "V6E", (1, 4, 8, 16, 32, 64, 128, 256)),
}
GENERATIONS: tuple[str, ...] = tuple(_GENERATIONS)

# Chips -> topology. v2/v3 and v5e/v6e slices are 2D tori, v4/v5p slices 3D.
_TOPOLOGY_2D = {
    1: "1x1",
    4: "2x2",
    8: "2x4",
    16: "4x4",
    32: "4x8",
    64: "8x8",
    128: "8x16",
    256: "16x16",
    512: "16x32",
    1024: "32x32",
}
_TOPOLOGY_3D = {
    4: "2x2x1",
    8: "2x2x2",
    16: "2x2x4",
    32: "2x4x4",
    64: "4x4x4",
    128: "4x4x8",
    256: "4x8x8",
    512: "8x8x8",
    1024: "8x8x16",
    2048: "8x16x16",
    4096: "16x16x16",
    6144: "16x16x24",
}


@dataclass(frozen=True)
class AcceleratorType:
    """One accelerator type, e.g. `v4-32`: a slice of `chips` chips on `workers` VMs."""

    name: str
    generation: str
    size: int
    chips: int
    cores: int
    workers: int
    config_type: str
    topology: str

    @property
    def multi_host(self) -> bool:
        return self.workers > 1


def _make(generation: str, size: int) -> AcceleratorType:
    prefix, config_type, _ = _GENERATIONS[generation]
    if generation in ("v5e", "v6e"):
        # The suffix counts chips, one TensorCore each; up to 8 chips sit on one VM,
        # multi-host slices have 4 chips per VM.
        chips, cores = size, size
        workers = 1 if size <= 8 else size // 4
        topology = _TOPOLOGY_2D[chips]
    else:
        # The suffix counts TensorCores, two per chip, four chips per VM.
        chips, cores = size // 2, size
        workers = max(1, size // 8)
        table = _TOPOLOGY_3D if generation in ("v4", "v5p") else _TOPOLOGY_2D
        topology = table[chips]
    return AcceleratorType(
        name=f"{prefix}{size}",
        generation=generation,
        size=size,
        chips=chips,
        cores=cores,
        workers=workers,
        config_type=config_type,
        topology=topology,
    )


ACCELERATOR_TYPES: dict[str, AcceleratorType] = {
    acc.name: acc
    for acc in (_make(gen, size) for gen, (_, _, sizes) in _GENERATIONS.items() for size in sizes)
}
API_DEFAULT_ACCELERATOR = "v2-8"  # what the TPU API creates when a body names no type
# tpuctl's own default for create and run: offered in DEFAULT_ZONE (v2-8, the API's
# default, is not), and the most common single-host slice in Google's tutorials.
DEFAULT_ACCELERATOR = "v3-8"
# Names people (and Google's own pages) use for the types the API calls otherwise.
_ALIASES = {"v5e": "v5litepod", "v5lite": "v5litepod", "v5litepod": "v5litepod"}


def canonical_accelerator(name: str) -> str:
    """The API's name for an accelerator type: `v5e-8` and `V5E-8` -> `v5litepod-8`;
    any other name only lowercased (unknown names are the API's to refuse)."""
    lowered = name.strip().lower()
    prefix, sep, size = lowered.rpartition("-")
    if sep and prefix in _ALIASES:
        return f"{_ALIASES[prefix]}-{size}"
    return lowered


def parse_accelerator(name: str) -> AcceleratorType | None:
    """The accelerator type called `name` (e.g. `v5litepod-16`), or None if there is none."""
    return ACCELERATOR_TYPES.get(name)


def accelerator_for_config(config_type: str, topology: str) -> AcceleratorType | None:
    """The accelerator type matching an `acceleratorConfig {type, topology}`, if any."""
    for acc in ACCELERATOR_TYPES.values():
        if acc.config_type == config_type and acc.topology == topology:
            return acc
    return None


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


def accelerator_types(zone: str) -> list[AcceleratorType]:
    """Every accelerator type offered in `zone` (empty for an unknown zone)."""
    gens = ZONES.get(zone, [])
    return [acc for acc in ACCELERATOR_TYPES.values() if acc.generation in gens]


def zones_offering(generation: str) -> list[str]:
    """The zones where a generation is offered."""
    return [zone for zone, gens in ZONES.items() if generation in gens]


# Runtime version -> the generations it boots on. From the Cloud TPU software-versions
# pages as recalled in shared/reference/tpu-facts.md and the defaults of Google's samples
# (`v2-tpuv5-litepod` is the default of python-docs-samples' v5e node and queued-resource
# samples); which older images run on which generation is not confirmed by a local source
# (docs/emulator.md says so). The emulator refuses a version on another generation.
_V23, _V234 = ("v2", "v3"), ("v2", "v3", "v4")
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
    "tpu-vm-tf-2.15.0-pjrt": _V234,
    "tpu-vm-tf-2.15.0-pod-pjrt": _V234,
    "tpu-vm-tf-2.15.0-se": _V23,
    "tpu-vm-tf-2.15.0-pod-se": _V23,
    "tpu-vm-tf-2.16.0-pjrt": _V234,
    "tpu-vm-tf-2.16.0-pod-pjrt": _V234,
    "tpu-vm-tf-2.16.0-se": _V23,
    "tpu-vm-tf-2.16.0-pod-se": _V23,
    "tpu-vm-tf-2.17.0-pjrt": _V234,
    "tpu-vm-tf-2.17.0-pod-pjrt": _V234,
    "tpu-vm-tf-2.18.0-pjrt": _V234,
    "tpu-vm-tf-2.18.0-pod-pjrt": _V234,
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


# USD per chip-hour in the generation's home region: (on-demand, spot/preemptible).
# From a billing-SKU-derived public catalog; other regions differ a little.
# v6e was checked against cloud.google.com/tpu/pricing as of PRICES_AS_OF.
PRICES_AS_OF = "2024-10-30"
PRICES: dict[str, tuple[float, float]] = {
    "v2": (1.125, 0.3375),
    "v3": (2.00, 0.51),
    "v4": (3.22, 0.9215),
    "v5e": (1.20, 0.213),
    "v5p": (4.20, 1.68),
    "v6e": (2.70, 0.648),
}


def hourly_price(acc: AcceleratorType, spot: bool = False) -> float:
    """List price in USD per hour for the whole slice (an estimate: regions vary)."""
    on_demand, cheap = PRICES[acc.generation]
    return round(acc.chips * (cheap if spot else on_demand), 4)


# -- quotas ---------------------------------------------------------------------
# The TPU quotas of the Cloud Quotas API (service tpu.googleapis.com), one per quota
# family and scheduling: the emulator enforces and serves this table, and tpuctl reads
# the limits of these quota ids. Spot and preemptible nodes count against the
# preemptible quotas; reserved nodes against reservations, which are not listed here.
# Ids and metrics marked "seen" appear in public error messages and quota listings;
# the others follow the same naming pattern (docs/quota.md says which is which).
QUOTA_SERVICE = "tpu.googleapis.com"
# States whose nodes no longer hold quota (the delete has been accepted).
QUOTA_FREE_STATES = frozenset({"DELETING"})


@dataclass(frozen=True)
class QuotaSpec:
    """One TPU quota: what it counts (chips or TensorCores), per region or per zone."""

    quota_id: str
    family: str  # "v2", "v2 pod", "v3", "v3 pod", "v4", "v5e", "v5e serving", "v5p", "v6e"
    preemptible: bool
    metric: str
    unit: str  # "chips" or "cores" (TensorCores)
    dimension: str  # "region" or "zone"
    new_project: int  # the limit a new project starts with
    granted: int  # the limit in the emulator's default project, which has been granted quota

    @property
    def scheduling(self) -> str:
        return "preemptible" if self.preemptible else "on-demand"

    def amount(self, acc: AcceleratorType) -> int:
        """How much of this quota one `acc` slice uses."""
        return acc.chips if self.unit == "chips" else acc.cores

    def location(self, zone: str) -> str:
        """The region or zone whose limit a node in `zone` counts against."""
        return zone if self.dimension == "zone" else region_of(zone)

    @property
    def display_name(self) -> str:
        kind = "preemptible " if self.preemptible else ""
        return f"TPU {self.family} {kind}{self.unit} per project per {self.dimension}"


def _pair(
    family: str,
    unit: str,
    dimension: str,
    ids: tuple[str, str],
    metric: str,
    limits: tuple[int, int, int, int],
) -> tuple[QuotaSpec, QuotaSpec]:
    """The on-demand and preemptible quotas of one family; limits are (on-demand new,
    on-demand granted, preemptible new, preemptible granted)."""
    return (
        QuotaSpec(ids[0], family, False, _M + metric, unit, dimension, limits[0], limits[1]),
        QuotaSpec(
            ids[1],
            family,
            True,
            _M + metric + "-preemptible",
            unit,
            dimension,
            limits[2],
            limits[3],
        ),
    )


_M = "tpu.googleapis.com/"
QUOTAS: tuple[QuotaSpec, ...] = (
    *_pair("v2", "cores", "zone",
           ("TPUV2sPerProjectPerZoneForTPUAPI", "TPUV2sPreemptiblePerProjectPerZoneForTPUAPI"),
           "tpu-v2", (16, 128, 48, 1024)),
    *_pair("v2 pod", "cores", "region",
           ("TPUV2sPodPerProjectPerRegionForTPUAPI",  # seen
            "TPUV2sPreemptiblePodPerProjectPerRegionForTPUAPI"),  # seen
           "tpu-v2-pod", (0, 512, 0, 2048)),
    *_pair("v3", "cores", "zone",
           ("TPUV3sPerProjectPerZoneForTPUAPI", "TPUV3sPreemptiblePerProjectPerZoneForTPUAPI"),
           "tpu-v3", (16, 128, 48, 1024)),
    *_pair("v3 pod", "cores", "region",
           ("TPUV3sPodPerProjectPerRegionForTPUAPI",
            "TPUV3sPreemptiblePodPerProjectPerRegionForTPUAPI"),
           "tpu-v3-pod", (0, 512, 0, 2048)),
    *_pair("v4", "chips", "region",
           ("TPUV4sPodPerProjectPerRegionForTPUAPI",
            "TPUV4sPreemptiblePodPerProjectPerRegionForTPUAPI"),  # seen
           "tpu-v4", (0, 512, 0, 2048)),  # metric tpu-v4-preemptible: seen
    *_pair("v5e", "chips", "region",
           ("TPUV5sLitepodPerProjectPerRegionForTPUAPI",  # seen
            "TPUV5sPreemptibleLitepodPerProjectPerRegionForTPUAPI"),  # seen
           "tpu-v5s-litepod", (0, 256, 0, 1024)),  # metric ...-preemptible: seen
    *_pair("v5e serving", "chips", "zone",
           ("TPUV5sLitepodServingPerProjectPerZoneForTPUAPI",  # seen
            "TPUV5sPreemptibleLitepodServingPerProjectPerZoneForTPUAPI"),  # seen
           "tpu-v5s-litepod-serving", (0, 64, 0, 256)),  # metrics: in the Cloud TPU docs
    *_pair("v5p", "cores", "zone",
           ("TPUV5PPerProjectPerZoneForTPUAPI",  # seen
            "TPUV5PPreemptiblePerProjectPerZoneForTPUAPI"),  # seen
           "tpu-v5p", (0, 1024, 0, 4096)),  # metric tpu-v5p-preemptible: seen
    *_pair("v6e", "chips", "region",
           ("TPUV6EPerProjectPerRegionForTPUAPI",  # seen
            "TPUV6EPreemptiblePerProjectPerRegionForTPUAPI"),  # seen
           "tpu-v6e", (0, 256, 0, 1024)),  # metric tpu-v6e-preemptible: seen
)  # fmt: skip
QUOTAS_BY_ID: dict[str, QuotaSpec] = {q.quota_id: q for q in QUOTAS}
QUOTA_FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(q.family for q in QUOTAS))


def quota_family(acc: AcceleratorType) -> str:
    """The quota family a slice counts against.

    v2 and v3 single devices (`-8`) and pods have separate quotas; single-host v5e
    (`v5litepod-1/4/8`) counts against the v5e serving quota, larger slices against v5e.
    """
    if acc.generation in ("v2", "v3"):
        return acc.generation if acc.size == 8 else f"{acc.generation} pod"
    if acc.generation == "v5e" and not acc.multi_host:
        return "v5e serving"
    return acc.generation


def quota_for(acc: AcceleratorType, scheduling: str) -> QuotaSpec | None:
    """The quota a create of `acc` counts against; scheduling is on-demand, spot,
    preemptible or reserved (None: reserved capacity is not counted here)."""
    if scheduling == "reserved":
        return None
    preemptible = scheduling in ("spot", "preemptible")
    family = quota_family(acc)
    for spec in QUOTAS:
        if spec.family == family and spec.preemptible == preemptible:
            return spec
    return None


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
