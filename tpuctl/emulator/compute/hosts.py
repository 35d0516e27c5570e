"""Compute Engine's TPU VMs as the emulator's workers see a TPU node: each single-host
instance, and each managed instance group's VMs in worker order, become a `ComputeHost`
that the SSH servers (workers/ssh.py), the worker files and the metadata server read as
they read a TPU API node (`uid`, `name`, `node_id`, `addresses`, `state`, `metadata`,
`accelerator`, guest attributes).

A host is a view, made again at every sync from the instances; what it publishes (the
SSH host keys) is kept on the instances, where `getGuestAttributes` answers it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tpuctl.emulator.compute import group_api, maintenance
from tpuctl.emulator.compute.catalog import slice_of
from tpuctl.emulator.compute.models import Instance
from tpuctl.emulator.core.state import State
from tpuctl.emulator.offerings.accelerators import SLICES, AcceleratorType


@dataclass
class ComputeHost:
    api = "compute"  # the workers' files tell it from a TPU API node (no TPU_WORKER_* env)
    uid: str
    name: str  # the instance's or the group's path
    node_id: str
    project: str
    zone: str
    vms: list[Instance | None]  # in worker order; None: a VM of the slice gone for good
    accelerator: AcceleratorType
    size: int  # the VMs the slice has when whole
    transition: str | None = None
    runtime_version: str = ""

    @property
    def instances(self) -> list[Instance]:
        """The VMs there are, in worker order."""
        return [i for i in self.vms if i is not None]

    @property
    def addresses(self) -> list[str]:
        return [i.address if i is not None else "" for i in self.vms]

    @property
    def state(self) -> str:
        whole = len(self.instances) == self.size
        running = all(i.status == "RUNNING" and i.transition is None for i in self.instances)
        return "READY" if whole and running else "CREATING"

    def serving(self) -> list[int]:
        """The workers whose VM runs: each VM of a slice is a machine of its own, which
        runs on (its processes, its SSH server, its metadata server) when another VM of
        the slice is preempted or deleted."""
        return [
            k
            for k, i in enumerate(self.vms)
            if i is not None and i.status == "RUNNING" and i.transition is None
        ]

    @property
    def preempting(self) -> list[int]:
        """The workers whose VM is in a preemption's notice (scheduling.py)."""
        return [k for k, i in enumerate(self.vms) if i is not None and i.preempt_ends is not None]

    @property
    def shutting_down(self) -> list[int]:
        """The workers whose VM's guest is being shut down for a host maintenance."""
        return [k for k, i in enumerate(self.vms) if maintenance.shutting_down(i)]

    @property
    def metadata(self) -> dict[str, str]:
        first = self.instances[0] if self.instances else None
        items = first.body.get("metadata", {}).get("items", []) if first else []
        return {str(i.get("key")): str(i.get("value", "")) for i in items}

    @property
    def guest_attributes(self) -> list[list[dict[str, str]]]:
        return [list(i.published) if i is not None else [] for i in self.vms]

    def set_guest_attributes(self, worker: int, items: list[dict[str, str]]) -> None:
        vm = self.vms[worker]
        if vm is not None:
            vm.published = [dict(item) for item in items]

    def render(self) -> dict[str, Any]:
        """What the metadata server needs, in the TPU API node's JSON names."""
        first = self.instances[0]
        account = (first.body.get("serviceAccounts") or [{}])[0]
        scheduling = first.body.get("scheduling") or {}
        return {
            "id": self.uid,
            "name": self.name,
            "acceleratorType": self.accelerator.name,
            "networkEndpoints": [{"ipAddress": a} for a in self.addresses],
            "metadata": self.metadata,
            "serviceAccount": {
                "email": account.get("email", "default"),
                "scope": account.get("scopes") or [],
            },
            "schedulingConfig": {"spot": scheduling.get("provisioningModel") == "SPOT"},
            "api": "compute",
            # each VM's own name and id ("" for a VM gone)
            "instanceNames": [i.name if i is not None else "" for i in self.vms],
            "instanceIds": [i.uid if i is not None else "" for i in self.vms],
        }


def hosts(state: State) -> list[ComputeHost]:
    """Every single-host TPU VM, and every slice once all its VMs have been made, as
    hosts: a slice stays one, with its workers' numbers, while any of its VMs is left (a
    VM preempted or deleted leaves its neighbours running)."""
    out = []
    for instance in state.compute.instances.values():
        if instance.group is None:
            shape = slice_of(instance.machine_type, 1)
            if shape is not None:
                out.append(
                    ComputeHost(
                        instance.uid,
                        instance.path,
                        instance.name,
                        instance.project,
                        instance.zone,
                        [instance],
                        shape,
                        1,
                    )
                )
    for group in state.compute.groups.values():
        members = group_api.members(state, group)
        vms = [i for _slot, i in members]
        present = [i for i in vms if i is not None]
        shape = slice_of(present[0].machine_type, group.target_size) if present else None
        # a slice is a host once all its VMs have been made (each worker's keys are made
        # at first sight), and stays one while any is left
        made = all(i is not None or slot.get("made") for slot, i in members)
        if shape is not None and made and len(vms) == group.target_size:
            out.append(
                ComputeHost(
                    group.uid,
                    group.path,
                    group.name,
                    group.project,
                    group.zone,
                    vms,
                    shape,
                    group.target_size,
                )
            )
    return out


def host(state: State, project: str, zone: str, name: str) -> ComputeHost | None:
    """The host a worker's metadata server answers for (`name`: instance or group)."""
    return next(
        (h for h in hosts(state) if (h.project, h.zone, h.node_id) == (project, zone, name)), None
    )


def attributes(view: dict[str, Any], worker: int) -> dict[str, str]:
    """What a Compute Engine slice VM shows beside its own metadata: its worker number
    (`worker-id`), the slice's endpoints and type, as a public walkthrough of a TPU7x
    slice shows them (contributing/emulator-fidelity.md; Google's reference lists none of them)."""
    shape = SLICES[view["acceleratorType"]]
    spelled = shape.name.replace("tpu7x-", "v7x-")  # the VMs spell TPU7x `v7x`
    return {
        "accelerator-type": spelled,
        "worker-id": str(worker),
        "worker-network-endpoints": ",".join(e["ipAddress"] for e in view["networkEndpoints"]),
        "tpu-env": "".join(
            f"{k}: '{v}'\n"
            for k, v in {
                "ACCELERATOR_TYPE": spelled,
                "TOPOLOGY": shape.topology,
                "WORKER_ID": str(worker),
            }.items()
        ),
    }
