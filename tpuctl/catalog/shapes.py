"""Slice shapes: what the user typed (`v4-32`, `v5e-8`, `tpu7x-16`) resolved once into a
`SliceShape`, for both TPU APIs (the Cloud TPU API's accelerator types; Compute Engine's
machine types per host). `tpuctl.catalog` re-exports all of it.

Pure data and small functions, no heavy imports. Sources: the Cloud TPU docs' version
pages (https://cloud.google.com/tpu/docs/v6e, .../v5p, .../tpu7x), gcloud's TPU messages,
and Compute Engine's accelerator-optimized machine types page
(https://cloud.google.com/compute/docs/accelerator-optimized-machines).
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
# contributing/architecture.md, "Two TPU APIs"). v5e and older are not offered on Compute Engine.
_MACHINE_TYPES: dict[str, dict[int, str]] = {
    "v5p": {4: "ct5p-hightpu-4t"},
    "v6e": {1: "ct6e-standard-1t", 4: "ct6e-standard-4t", 8: "ct6e-standard-8t"},
    "tpu7x": {4: "tpu7x-standard-4t"},
}


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
