"""The TPU slices the emulated cloud knows: every accelerator type of the Cloud TPU API and
every TPU7x slice of Compute Engine, with its chips, TensorCores, hosts and topology.

Each generation is written as the topologies its page lists; the rest follows from the
public rules: a name's number counts TensorCores (one per chip on v5e and v6e, two on the
others), a slice whose chips fit one VM is single-host, and a larger one has four chips per
VM. Sources: https://cloud.google.com/tpu/docs/v2, .../v3, .../v4, .../v5e, .../v5p,
.../v6e, .../tpu7x, https://cloud.google.com/tpu/docs/system-architecture-tpu-vm and the
`acceleratorConfig.type` enum of the TPU API v2 reference
(https://cloud.google.com/tpu/docs/reference/rest/v2/AcceleratorConfig).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Generation:
    prefix: str  # of the type's name: `v5litepod-` for v5e
    config_type: str  # acceleratorConfig.type ("" where the TPU API does not offer it)
    cores_per_chip: int
    single_host_chips: int  # the most chips one VM holds
    topologies: tuple[str, ...]

    @property
    def on_tpu_api(self) -> bool:
        return bool(self.config_type)


_2D = ("2x2", "4x4", "4x8", "8x8", "8x16", "16x16", "16x32", "32x32")
_3D = ("2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8")
_LITE = ("1x1", "2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16")
GENERATIONS: dict[str, Generation] = {
    # v2-8 ... v2-512 (https://cloud.google.com/tpu/docs/v2)
    "v2": Generation("v2-", "V2", 2, 4, ("2x2", "4x4", "8x8", "8x16", "16x16")),
    # v3-8 ... v3-2048 (https://cloud.google.com/tpu/docs/v3)
    "v3": Generation("v3-", "V3", 2, 4, _2D),
    # v4-8 ... v4-4096, 3D tori (https://cloud.google.com/tpu/docs/v4)
    "v4": Generation("v4-", "V4", 2, 4, (*_3D, "8x8x16", "8x16x16")),
    # v5litepod-1 ... v5litepod-256, up to 8 chips on one VM (https://cloud.google.com/tpu/docs/v5e)
    "v5e": Generation("v5litepod-", "V5LITE_POD", 1, 8, _LITE),
    # v5p-8 ... v5p-12288, 6144 chips at most (https://cloud.google.com/tpu/docs/v5p)
    "v5p": Generation("v5p-", "V5P", 2, 4, (*_3D, "8x8x16", "8x16x16", "16x16x16", "16x16x24")),
    # v6e-1 ... v6e-256 (https://cloud.google.com/tpu/docs/v6e)
    "v6e": Generation("v6e-", "V6E", 1, 8, _LITE),
    # tpu7x-8 ... tpu7x-512, Compute Engine only: the TPU API is frozen before TPU7x
    # (https://cloud.google.com/tpu/docs/tpu7x, https://cloud.google.com/compute/docs/tpus)
    "tpu7x": Generation("tpu7x-", "", 2, 4, (*_3D[:-1],)),
}


@dataclass(frozen=True)
class AcceleratorType:
    """One slice: `v4-32` is 16 chips (32 TensorCores) in a 2x2x4 torus over 4 VMs."""

    name: str
    generation: str
    chips: int
    cores: int  # TensorCores
    hosts: int  # VMs; the TPU API calls them workers
    topology: str
    config_type: str  # acceleratorConfig.type ("" off the TPU API)

    @property
    def workers(self) -> int:
        return self.hosts

    @property
    def chips_per_host(self) -> int:
        return self.chips // self.hosts

    @property
    def multi_host(self) -> bool:
        return self.hosts > 1

    @property
    def on_tpu_api(self) -> bool:
        return bool(self.config_type)


def _slice(generation: str, topology: str) -> AcceleratorType:
    gen = GENERATIONS[generation]
    chips = math.prod(int(d) for d in topology.split("x"))
    cores = chips * gen.cores_per_chip
    hosts = 1 if chips <= gen.single_host_chips else chips // 4
    name = f"{gen.prefix}{cores}"
    return AcceleratorType(name, generation, chips, cores, hosts, topology, gen.config_type)


# Every slice by name, the TPU API's and Compute Engine's.
SLICES: dict[str, AcceleratorType] = {
    acc.name: acc
    for acc in (_slice(g, t) for g, gen in GENERATIONS.items() for t in gen.topologies)
}
# The TPU API's accelerator types (what it lists and creates).
ACCELERATOR_TYPES: dict[str, AcceleratorType] = {
    name: acc for name, acc in SLICES.items() if acc.on_tpu_api
}
# What the TPU API creates when a body names neither `acceleratorType` nor
# `acceleratorConfig` (https://cloud.google.com/tpu/docs/reference/rest/v2/projects.locations.nodes).
API_DEFAULT_ACCELERATOR = "v2-8"


def parse_accelerator(name: str) -> AcceleratorType | None:
    """The TPU API accelerator type called exactly `name`, or None."""
    return ACCELERATOR_TYPES.get(name)


def accelerator_for_config(config_type: str, topology: str) -> AcceleratorType | None:
    """The accelerator type an `acceleratorConfig {type, topology}` names, if any."""
    return next(
        (
            acc
            for acc in ACCELERATOR_TYPES.values()
            if (acc.config_type, acc.topology) == (config_type, topology)
        ),
        None,
    )
