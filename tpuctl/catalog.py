"""What Cloud TPU offers: accelerator types, zones, runtime versions and list prices.

Pure data and small functions, no heavy imports: the CLI reads it for defaults and
costs, and the emulator for the rules it enforces. Facts are from gcloud's TPU
messages, the Cloud TPU docs and public catalogs (see shared/reference/tpu-facts.md).
"""

from __future__ import annotations

from dataclasses import dataclass

# generation -> (name prefix, acceleratorConfig.type, sizes offered). The TPU API offers
# every generation but TPU7x; Compute Engine offers v5p, v6e and TPU7x (below).
_GENERATIONS: dict[str, tuple[str, str, tuple[int, ...]]] = {
    "v2": ("v2-", "V2", (8, 32, 128, 256, 512)),
    "v3": ("v3-", "V3", (8, 32, 64, 128, 256, 512, 1024, 2048)),
    "v4": ("v4-", "V4", (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)),
    "v5e": ("v5litepod-", "V5LITE_POD", (1, 4, 8, 16, 32, 64, 128, 256)),
    "v5p": ("v5p-", "V5P", (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 12288)),
    "v6e": ("v6e-", "V6E", (1, 4, 8, 16, 32, 64, 128, 256)),
    "tpu7x": ("tpu7x-", "", (8, 16, 32, 64, 128, 256, 512)),
}
GENERATIONS: tuple[str, ...] = tuple(_GENERATIONS)
# Generations the Cloud TPU API offers (it is frozen: TPU7x and later are Compute Engine's).
TPU_API_GENERATIONS: tuple[str, ...] = ("v2", "v3", "v4", "v5e", "v5p", "v6e")

# Chips -> topology. v2/v3 and v5e/v6e slices are 2D tori, v4/v5p/TPU7x slices 3D.
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

# Compute Engine's machine type per host, by generation and chips per host (the TPU
# machine-types page of Compute Engine, https://cloud.google.com/compute/docs/accelerator-optimized-machines;
# docs/architecture.md, "Two TPU APIs"). v5e and older are not offered on Compute Engine.
_MACHINE_TYPES: dict[str, dict[int, str]] = {
    "v5p": {4: "ct5p-hightpu-4t"},
    "v6e": {1: "ct6e-standard-1t", 4: "ct6e-standard-4t", 8: "ct6e-standard-8t"},
    "tpu7x": {4: "tpu7x-standard-4t"},
}
API_NAMES = {"tpu": "the Cloud TPU API", "compute": "Compute Engine"}


@dataclass(frozen=True)
class SliceShape:
    """A TPU slice as the user asked for it, resolved once by the catalogue: `v4-32` is
    32 TensorCores on 16 chips over 4 hosts, topology 2x2x4, the TPU API's `v4-32`.

    Every layer below the CLI takes this value; none parses an accelerator name again.
    `known` is False for a name the catalogue has never heard of: it is passed to the
    TPU API as it is (the API is the judge of what it offers), with nothing else known.
    """

    name: str  # what tpuctl calls it: the TPU API's name, or TPU7x's (`tpu7x-16`)
    generation: str  # v2 v3 v4 v5e v5p v6e tpu7x ("" when unknown)
    size: int  # the name's number: TensorCores (v2-v4, v5p, TPU7x) or chips (v5e, v6e)
    chips: int
    cores: int  # TensorCores
    hosts: int
    topology: str
    tpu_type: str | None  # the TPU API's acceleratorType; None where it offers none
    machine_type: str | None  # Compute Engine's machine type per host; None likewise
    config_type: str = ""  # the TPU API's acceleratorConfig.type
    known: bool = True

    @property
    def workers(self) -> int:
        """The VMs of the slice (the TPU API's word for hosts)."""
        return self.hosts

    @property
    def chips_per_host(self) -> int:
        return self.chips // self.hosts if self.hosts else 0

    @property
    def multi_host(self) -> bool:
        return self.hosts > 1

    @property
    def apis(self) -> tuple[str, ...]:
        """The APIs that offer it: "tpu" (the Cloud TPU API), "compute" (Compute Engine)."""
        offered = ("tpu",) if self.tpu_type else ()
        return offered + (("compute",) if self.machine_type else ())

    @property
    def quota_family(self) -> str:
        """The TPU API quota family a slice counts against.

        v2 and v3 single devices (`-8`) and pods have separate quotas; single-host v5e
        (`v5litepod-1/4/8`) counts against the v5e serving quota, larger slices against v5e.
        """
        if self.generation in ("v2", "v3"):
            return self.generation if self.size == 8 else f"{self.generation} pod"
        if self.generation == "v5e" and not self.multi_host:
            return "v5e serving"
        return self.generation

    @property
    def price_key(self) -> str:
        """The row of the price table (per chip-hour) this slice is priced by."""
        return self.generation

    @classmethod
    def unknown(cls, name: str) -> SliceShape:
        return cls(name, "", 0, 0, 0, 1, "", name, None, known=False)


# The name the emulator knows it by (an accelerator type the TPU API is sent).
AcceleratorType = SliceShape


def _make(generation: str, size: int) -> SliceShape:
    prefix, config_type, _ = _GENERATIONS[generation]
    if generation in ("v5e", "v6e"):
        # The suffix counts chips, one TensorCore each; up to 8 chips sit on one VM,
        # multi-host slices have 4 chips per VM.
        chips, cores = size, size
        hosts = 1 if size <= 8 else size // 4
        topology = _TOPOLOGY_2D[chips]
    else:
        # The suffix counts TensorCores, two per chip, four chips per VM.
        chips, cores = size // 2, size
        hosts = max(1, size // 8)
        table = _TOPOLOGY_3D if generation in ("v4", "v5p", "tpu7x") else _TOPOLOGY_2D
        topology = table[chips]
    name = f"{prefix}{size}"
    machine = _MACHINE_TYPES.get(generation, {}).get(chips // hosts)
    tpu_type = name if generation in TPU_API_GENERATIONS else None
    return SliceShape(
        name, generation, size, chips, cores, hosts, topology, tpu_type, machine, config_type
    )


SHAPES: dict[str, SliceShape] = {
    acc.name: acc
    for acc in (_make(gen, size) for gen, (_, _, sizes) in _GENERATIONS.items() for size in sizes)
}
# The TPU API's accelerator types (what it lists, what the emulator offers).
ACCELERATOR_TYPES: dict[str, SliceShape] = {
    acc.tpu_type: acc for acc in SHAPES.values() if acc.tpu_type
}
API_DEFAULT_ACCELERATOR = "v2-8"  # what the TPU API creates when a body names no type
# tpuctl's own default for create and run: offered in DEFAULT_ZONE (v2-8, the API's
# default, is not), and the most common single-host slice in Google's tutorials.
DEFAULT_ACCELERATOR = "v3-8"
# Names people (and Google's own pages) use for the types the API calls otherwise:
# TPU7x VMs' own metadata spells their type `v7x-16`.
_ALIASES = {
    "v5e": "v5litepod",
    "v5lite": "v5litepod",
    "v5litepod": "v5litepod",
    "v7x": "tpu7x",
    "tpu7x": "tpu7x",
}


def canonical_accelerator(name: str) -> str:
    """tpuctl's name for an accelerator type: `v5e-8` and `V5E-8` -> `v5litepod-8`,
    `v7x-16` -> `tpu7x-16`; any other name only lowercased (unknown names are the API's
    to refuse)."""
    lowered = name.strip().lower()
    prefix, sep, size = lowered.rpartition("-")
    if sep and prefix in _ALIASES:
        return f"{_ALIASES[prefix]}-{size}"
    return lowered


def shape(name: str) -> SliceShape:
    """The slice called `name`, as the user typed it (`v5e-8`, `V4-32`, `tpu7x-16`); a
    name the catalogue does not know is an unknown shape (`known` False) for the API to
    judge. This is the one parser of accelerator names."""
    canonical = canonical_accelerator(name)
    return SHAPES.get(canonical) or SliceShape.unknown(canonical)


def parse_accelerator(name: str) -> SliceShape | None:
    """The TPU API accelerator type called exactly `name` (e.g. `v5litepod-16`), or None."""
    return ACCELERATOR_TYPES.get(name)


def accelerator_for_config(config_type: str, topology: str) -> SliceShape | None:
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


def accelerator_types(zone: str) -> list[SliceShape]:
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


def hourly_price(acc: SliceShape, spot: bool = False) -> float:
    """List price in USD per hour for the whole slice (an estimate: regions vary)."""
    on_demand, cheap = PRICES[acc.generation]
    return round(acc.chips * (cheap if spot else on_demand), 4)


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
    *_family("v2", "cores", "tpu-v2", (16, 128, 48, 1024),
             ("TPUV2sPerProjectPerZoneForTPUAPI", _ZONE, False),
             ("TPUV2sPreemptiblePerProjectPerZoneForTPUAPI", _ZONE, False)),
    *_family("v2 pod", "cores", "tpu-v2-pod", (0, 512, 0, 2048),
             ("TPUV2sPodPerProjectPerRegionForTPUAPI", _REGION, True),
             ("TPUV2sPreemptiblePodPerProjectPerRegionForTPUAPI", _REGION, False),
             ("TPUV2sPodPerProjectPerZoneForTPUAPI", _ZONE, True),
             ("TPUV2sPreemptiblePodPerProjectPerZoneForTPUAPI", _ZONE, False)),
    *_family("v3", "cores", "tpu-v3", (16, 128, 48, 1024),
             ("TPUV3sPerProjectPerZoneForTPUAPI", _ZONE, False),
             ("TPUV3sPreemptiblePerProjectPerZoneForTPUAPI", _ZONE, False)),
    *_family("v3 pod", "cores", "tpu-v3-pod", (0, 512, 0, 2048),
             ("TPUV3sPodPerProjectPerRegionForTPUAPI", _REGION, False),
             ("TPUV3sPreemptiblePodPerProjectPerRegionForTPUAPI", _REGION, False),
             ("TPUV3sPodPerProjectPerZoneForTPUAPI", _ZONE, False),
             ("TPUV3sPreemptiblePodPerProjectPerZoneForTPUAPI", _ZONE, False)),
    *_family("v4", "chips", "tpu-v4", (0, 512, 0, 2048),
             ("TPUV4sPodPerProjectPerRegionForTPUAPI", _REGION, False),
             ("TPUV4sPreemptiblePodPerProjectPerRegionForTPUAPI", _REGION, True),
             ("TPUV4sPodPerProjectPerZoneForTPUAPI", _ZONE, False),
             ("TPUV4sPreemptiblePodPerProjectPerZoneForTPUAPI", _ZONE, True)),
    *_family("v5e", "chips", "tpu-v5s-litepod", (0, 256, 0, 1024),
             ("TPUV5sLitepodPerProjectPerRegionForTPUAPI", _REGION, True),
             ("TPUV5sPreemptibleLitepodPerProjectPerRegionForTPUAPI", _REGION, True),
             ("TPUV5sLitepodPerProjectPerZoneForTPUAPI", _ZONE, True),
             ("TPUV5sPreemptibleLitepodPerProjectPerZoneForTPUAPI", _ZONE, True)),
    *_family("v5e serving", "chips", "tpu-v5s-litepod-serving", (0, 64, 0, 256),
             ("TPUV5sLitepodServingPerProjectPerZoneForTPUAPI", _ZONE, True),
             ("TPUV5sPreemptibleLitepodServingPerProjectPerZoneForTPUAPI", _ZONE, True)),
    *_family("v5p", "cores", "tpu-v5p", (0, 1024, 0, 4096),
             ("TPUV5PPerProjectPerZoneForTPUAPI", _ZONE, True),
             ("TPUV5PPreemptiblePerProjectPerZoneForTPUAPI", _ZONE, True),
             ("TPUV5PPerProjectPerRegionForTPUAPI", _REGION, True),
             ("TPUV5PPreemptiblePerProjectPerRegionForTPUAPI", _REGION, False)),
    *_family("v6e", "chips", "tpu-v6e", (0, 256, 0, 1024),
             ("TPUV6EPerProjectPerRegionForTPUAPI", _REGION, True),
             ("TPUV6EPreemptiblePerProjectPerRegionForTPUAPI", _REGION, True),
             ("TPUV6EPerProjectPerZoneForTPUAPI", _ZONE, True),
             ("TPUV6EPreemptiblePerProjectPerZoneForTPUAPI", _ZONE, True)),
)  # fmt: skip
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
