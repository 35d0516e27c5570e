"""Compute Engine's calls on the backend (a mixin of `services.Backend`): its TPU VMs as
the workers and their metadata servers see them (compute/hosts.py), and what the control
plane does to its instances, groups and reservations."""

from __future__ import annotations

from typing import Any

from tpuctl.emulator.compute import admission as compute_admission
from tpuctl.emulator.compute import api as compute_api
from tpuctl.emulator.compute import group_api as compute_groups
from tpuctl.emulator.compute import hosts as compute_hosts
from tpuctl.emulator.compute import scheduling as compute_scheduling
from tpuctl.emulator.compute.hosts import ComputeHost
from tpuctl.emulator.core import errors
from tpuctl.emulator.core.backend import BackendCore
from tpuctl.emulator.core.locking import locked


class ComputeCalls(BackendCore):
    @property
    def compute_hosts(self) -> list[ComputeHost]:
        """Compute Engine's TPU VMs and slices as the workers see a node (compute/hosts.py);
        read it with the lock held."""
        return compute_hosts.hosts(self.state)

    @locked
    def compute_guest_view(
        self, project: str, zone: str, name: str, worker: int = 0
    ) -> tuple[dict[str, Any] | None, bool]:
        """What a Compute Engine VM's metadata server shows: its host (an instance, or the
        slice its group makes) in the TPU node's JSON names, or None; and whether worker
        `worker`'s VM is being preempted (compute/scheduling.py)."""
        found = compute_hosts.host(self.state, project, zone, name)
        if found is None or not found.instances:
            return None, False
        vm = found.vms[worker] if 0 <= worker < len(found.vms) else None
        return found.render(), vm is not None and compute_scheduling.preempted(vm)

    @locked
    def guest_maintenance(
        self, project: str, zone: str, name: str, worker: int
    ) -> tuple[dict[str, Any] | None, bool]:
        """The maintenance record a worker's metadata server shows (core/maintenance.py),
        and whether its VM live-migrates (onHostMaintenance MIGRATE) rather than stops."""
        node = self.state.nodes.get(f"projects/{project}/locations/{zone}/nodes/{name}")
        if node is not None:
            record = node.maintenance
            aimed = record is not None and record.get("worker") not in (None, worker)
            return (None if aimed else record), False
        found = compute_hosts.host(self.state, project, zone, name)
        vm = found.vms[worker] if found and 0 <= worker < len(found.vms) else None
        if vm is None:
            return None, False
        return vm.maintenance, vm.body["scheduling"].get("onHostMaintenance") == "MIGRATE"

    @locked
    def all_instances(self) -> list[dict]:
        """Every Compute Engine instance of every project, then every group, template and
        policy (control plane: a test that leaves one behind fails)."""
        return compute_api.all_instances(self.state) + compute_groups.all_resources(self.state)

    @locked
    def compute_age(self, path: str, seconds: float) -> dict:
        """Make a Compute Engine group, template or policy `seconds` older (its
        creationTimestamp): what a test needs to see a leftover of long ago."""
        compute = self.state.compute
        for table in (compute.groups, compute.templates, compute.policies):
            if path in table:
                table[path].created -= float(seconds)
                return {"path": path, "created": table[path].created}
        raise errors.not_found(f"no group, template or policy {path}")

    @locked
    def compute_preempt(self, instance: str, notice: float | None = None) -> dict[str, Any]:
        return compute_scheduling.preempt(self.state, instance, notice)

    @locked
    def compute_preempt_worker(
        self, project: str, zone: str, name: str, worker: int | None, notice: float | None
    ) -> dict[str, Any]:
        return compute_scheduling.preempt_worker(self.state, project, zone, name, worker, notice)

    @locked
    def compute_reservation(self, body: dict[str, Any]) -> dict[str, Any]:
        return compute_admission.set_reservation(self.state, body)
