"""What Compute Engine offers for TPUs here: the TPU machine types per zone and the TPU
OS images. Data only.

Machine types, chips, vCPUs and memory: Compute Engine's TPU machine page
(https://docs.cloud.google.com/compute/docs/tpus/tpu-machines); which generation and how
many chips each brings come from `tpuctl.catalog` (shapes.py), so the two cannot drift.
Zones: a machine type is offered where `tpuctl.catalog.ZONES` offers its generation;
TPU7x only in us-central1-c (https://docs.cloud.google.com/tpu/docs/regions-zones).
v5e (`ct5lp-hightpu-*`) is listed but refused to `instances.insert`: it exists for GKE
node pools only (a public migration guide quotes the refusal, see docs/emulator.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from tpuctl import catalog


@dataclass(frozen=True)
class MachineType:
    name: str
    generation: str
    chips: int
    guest_cpus: int
    memory_gb: int
    accelerator: str  # MachineType.accelerators[].guestAcceleratorType
    instances_allowed: bool = True  # False: listed, but instances.insert refuses it

    @property
    def memory_mb(self) -> int:
        return self.memory_gb * 1024

    @property
    def description(self) -> str:
        return f"{self.guest_cpus} vCPUs, {self.memory_gb} GB RAM, {self.chips} TPU chips"


# name -> (vCPUs, memory in GB) from the machine page's table
_SIZES = {
    "tpu7x-standard-4t": (224, 960),
    "ct6e-standard-1t": (44, 176),
    "ct6e-standard-4t": (180, 720),
    "ct6e-standard-8t": (360, 1440),
    "ct5p-hightpu-4t": (208, 448),
}
# v5e: GKE's TPU page (vCPUs, memory); not offered to Compute Engine instances
_V5E = {
    "ct5lp-hightpu-1t": (1, 24, 48),
    "ct5lp-hightpu-4t": (4, 112, 192),
    "ct5lp-hightpu-8t": (8, 224, 384),
}


def _machine_types() -> dict[str, MachineType]:
    out: dict[str, MachineType] = {}
    for shape in catalog.SHAPES.values():
        name = shape.machine_type
        if name and name not in out:
            cpus, memory = _SIZES[name]
            prefix = name.split("-", 1)[0]  # ct6e, ct5p, tpu7x (ct5lp for v5e, public output)
            out[name] = MachineType(
                name, shape.generation, shape.chips_per_host, cpus, memory, prefix
            )
    for name, (chips, cpus, memory) in _V5E.items():
        out[name] = MachineType(name, "v5e", chips, cpus, memory, "ct5lp", instances_allowed=False)
    return out


MACHINE_TYPES: dict[str, MachineType] = _machine_types()
# TPU7x is in no zone of tpuctl.catalog.ZONES (the TPU API does not offer it)
_EXTRA_ZONES = {"tpu7x": ["us-central1-c"]}


def zones() -> list[str]:
    """Every zone served (Compute's zones here are the TPU catalogue's)."""
    return list(catalog.ZONES)


def machine_types(zone: str) -> list[MachineType]:
    """The TPU machine types offered in `zone`, by name."""
    gens = set(catalog.ZONES.get(zone, []))
    gens |= {gen for gen, where in _EXTRA_ZONES.items() if zone in where}
    return sorted((m for m in MACHINE_TYPES.values() if m.generation in gens), key=lambda m: m.name)


def machine_type(zone: str, name: str) -> MachineType | None:
    return next((m for m in machine_types(zone) if m.name == name), None)


# The TPU OS images (project ubuntu-os-accelerator-images): family -> the dated image
# it points at (names as public guides show them).
IMAGE_PROJECT = "ubuntu-os-accelerator-images"
IMAGES = {
    "ubuntu-accel-2204-amd64-tpu-v5e-v5p-v6e": "ubuntu-accel-2204-amd64-tpu-v5e-v5p-v6e-v20260530",
    "ubuntu-accel-2404-amd64-tpu-tpu7x": "ubuntu-accel-2404-amd64-tpu-tpu7x-v20260716",
}
