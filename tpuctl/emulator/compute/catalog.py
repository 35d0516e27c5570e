"""What Compute Engine offers for TPUs here: the TPU machine types per zone and the TPU
OS images. Data only.

Machine types, their generation, chips, vCPUs and memory: Compute Engine's TPU machine
page (https://docs.cloud.google.com/compute/docs/tpus/tpu-machines). A slice of N hosts is
N VMs of its generation's machine type holding its chips per host (`slice_of`).
Zones: a machine type is offered where the emulator's TPU zones (offerings/zones.py)
offer its generation; TPU7x only in us-central1-c
(https://docs.cloud.google.com/tpu/docs/regions-zones).
v5e (`ct5lp-hightpu-*`) is listed but refused to `instances.insert`: it exists for GKE
node pools only (a public migration guide quotes the refusal, see
contributing/emulator-fidelity.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from tpuctl.emulator.offerings import zones as tpu_zones
from tpuctl.emulator.offerings.accelerators import SLICES, AcceleratorType


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


# The machine page's table: name -> (generation, chips, vCPUs, memory in GB); the
# accelerator name is the type's prefix (ct6e, ct5p, tpu7x; ct5lp for v5e, public output).
_OFFERED = {
    "tpu7x-standard-4t": ("tpu7x", 4, 224, 960),
    "ct6e-standard-1t": ("v6e", 1, 44, 176),
    "ct6e-standard-4t": ("v6e", 4, 180, 720),
    "ct6e-standard-8t": ("v6e", 8, 360, 1440),
    "ct5p-hightpu-4t": ("v5p", 4, 208, 448),
}
# v5e: GKE's TPU page (chips, vCPUs, memory); not offered to Compute Engine instances
_V5E = {
    "ct5lp-hightpu-1t": (1, 24, 48),
    "ct5lp-hightpu-4t": (4, 112, 192),
    "ct5lp-hightpu-8t": (8, 224, 384),
}
MACHINE_TYPES: dict[str, MachineType] = {
    **{
        name: MachineType(name, gen, chips, cpus, memory, name.split("-", 1)[0])
        for name, (gen, chips, cpus, memory) in _OFFERED.items()
    },
    **{
        name: MachineType(name, "v5e", chips, cpus, memory, "ct5lp", instances_allowed=False)
        for name, (chips, cpus, memory) in _V5E.items()
    },
}


def slice_of(machine_type: str, hosts: int) -> AcceleratorType | None:
    """The slice `hosts` VMs of `machine_type` make (None if they make none)."""
    found = MACHINE_TYPES.get(machine_type)
    if found is None or not found.instances_allowed:
        return None
    return next(
        (
            acc
            for acc in SLICES.values()
            if (acc.generation, acc.chips_per_host, acc.hosts)
            == (found.generation, found.chips, hosts)
        ),
        None,
    )


# TPU7x is in no zone of the TPU API (which does not offer it)
_EXTRA_ZONES = {"tpu7x": ["us-central1-c"]}


def zones() -> list[str]:
    """Every zone served (Compute's zones here are the TPU API's)."""
    return list(tpu_zones.ZONES)


def machine_types(zone: str) -> list[MachineType]:
    """The TPU machine types offered in `zone`, by name."""
    gens = set(tpu_zones.generations(zone))
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
