"""The three resources of a multi-host TPU slice on Compute Engine, as state: a regional
workload policy (the slice's topology), an instance template (global or regional) and a
zonal managed instance group (MIG) of as many VMs as the slice has hosts.

Invariants:
- A group's insert operation is DONE when the group exists, before any of its VMs does
  (Compute's instanceGroupManagers.insert reference): the VMs are made at the next tick,
  one per slot, each slot with its worker number and a name `BASE-xxxx`.
- A slot whose VM could not be made (no capacity) keeps its last attempt's error and is
  tried again at each tick while the group is not being deleted. A slot whose VM went
  away (deleted, preempted) is not made again under `DO_NOTHING`, the action tpuctl asks
  for; under `REPAIR` (the API's default) it is.
- A deleting group deletes its VMs; it is gone, and its delete operation DONE, once they
  all are.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any


def uid() -> str:
    return str(secrets.randbits(63))  # Compute's ids are uint64, written as strings


@dataclass
class Policy:
    """A workload policy (`resourcePolicies`, regional)."""

    project: str
    region: str
    name: str
    workload: dict[str, str]  # type, acceleratorTopology, acceleratorTopologyMode
    description: str
    created: float
    uid: str = field(default_factory=uid)

    @property
    def path(self) -> str:
        return f"projects/{self.project}/regions/{self.region}/resourcePolicies/{self.name}"


@dataclass
class Template:
    """An instance template: global (`region` "") or regional."""

    project: str
    region: str
    name: str
    properties: dict[str, Any]  # the instance's body, machineType a bare name
    description: str
    created: float
    uid: str = field(default_factory=uid)

    @property
    def path(self) -> str:
        scope = f"regions/{self.region}" if self.region else "global"
        return f"projects/{self.project}/{scope}/instanceTemplates/{self.name}"


@dataclass
class Group:
    """A zonal managed instance group. `slots` are its VMs as the group means them:
    `{"name", "worker", "error" (the last attempt's, or None), "lost" (its VM went away
    and is not made again)}`."""

    project: str
    zone: str
    name: str
    base: str  # baseInstanceName
    template: str  # the template's path
    target_size: int
    policy: str  # the workload policy's path, or ""
    on_failure: str  # instanceLifecyclePolicy.defaultActionOnFailure: REPAIR | DO_NOTHING
    body: dict[str, Any]  # what was asked for (description, allInstancesConfig, ...)
    created: float
    uid: str = field(default_factory=uid)
    slots: list[dict[str, Any]] = field(default_factory=list)
    spawned: bool = False  # its VMs have been asked for (the tick after the insert)
    deleting: bool = False

    @property
    def path(self) -> str:
        return f"projects/{self.project}/zones/{self.zone}/instanceGroupManagers/{self.name}"

    def instance_path(self, slot: dict[str, Any]) -> str:
        return f"projects/{self.project}/zones/{self.zone}/instances/{slot['name']}"


@dataclass
class Reservation:
    """A zonal reservation of `count` VMs of a machine type (set from the control plane)."""

    project: str
    zone: str
    name: str
    machine_type: str
    count: int
    specific_only: bool = False  # specificReservationRequired

    @property
    def path(self) -> str:
        return f"projects/{self.project}/zones/{self.zone}/reservations/{self.name}"
