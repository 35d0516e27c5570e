"""The control plane's host maintenance (`POST /_emulator/v1/maintenance`): announce one
on a TPU API node or on Compute Engine VMs, then let the clock carry it out
(tpu/maintenance.py, compute/maintenance.py; the window: core/maintenance.py)."""

from __future__ import annotations

import re
from typing import Any

from tpuctl.emulator.compute import hosts
from tpuctl.emulator.compute import maintenance as compute_maintenance
from tpuctl.emulator.compute.models import Instance
from tpuctl.emulator.core import errors
from tpuctl.emulator.core import maintenance as window
from tpuctl.emulator.core.state import State
from tpuctl.emulator.tpu import maintenance as tpu_maintenance
from tpuctl.emulator.tpu import nodes as tpu_nodes

KEYS = {"node", "notice", "duration", "worker", "type"}
_TPU = re.compile(r"projects/[^/]+/locations/[^/]+/nodes/[^/]+")
_VM = re.compile(r"projects/(?P<project>[^/]+)/zones/(?P<zone>[^/]+)/instances/(?P<name>[^/]+)")


def maintenance(state: State, body: dict[str, Any]) -> dict[str, Any]:
    """Announce a host maintenance `notice` seconds from now, lasting `duration` (60 s
    by default): on a TPU API node (`projects/P/locations/Z/nodes/N`, the whole node;
    `worker` names the VM whose metadata server announces it), or on Compute Engine VMs
    (`projects/P/zones/Z/instances/N`: a VM, or a slice's group by name, whose VMs all
    get it, or worker `worker`'s VM only)."""
    unknown = set(body) - KEYS
    if unknown or "node" not in body:
        raise errors.invalid_argument(f"maintenance takes {sorted(KEYS)}, node required")
    name, worker = str(body["node"]), body.get("worker")
    if worker is not None and (isinstance(worker, bool) or not isinstance(worker, int)):
        raise errors.invalid_argument("worker must be a whole number")
    kind = body.get("type", "SCHEDULED")
    if kind not in window.TYPES:
        raise errors.invalid_argument(f"type must be one of {list(window.TYPES)}")
    notice, duration = body.get("notice"), body.get("duration")
    window.announce(state.now(), notice, duration, kind)  # checks the numbers
    if _TPU.fullmatch(name):
        node = tpu_nodes.by_name(state, name)
        return tpu_maintenance.announce(state, node, notice, duration, worker, kind)
    found = _VM.fullmatch(name)
    if found is None:
        raise errors.invalid_argument(
            "node is projects/P/locations/Z/nodes/N or projects/P/zones/Z/instances/N"
        )
    vms = _vms(state, found["project"], found["zone"], found["name"], worker)
    for vm in vms:
        if vm.maintenance is not None:
            raise errors.failed_precondition(f"Instance {vm.path} already has a maintenance.")
    shown = [compute_maintenance.announce(state, vm, notice, duration, kind) for vm in vms]
    return {
        "name": name,
        "instances": [s["name"] for s in shown],
        "upcomingMaintenance": shown[0]["upcomingMaintenance"],
    }


def _vms(state: State, project: str, zone: str, name: str, worker: int | None) -> list[Instance]:
    path = f"projects/{project}/zones/{zone}/instances/{name}"
    host = hosts.host(state, project, zone, name)
    if host is None:  # a VM of a group (a slice's) named as itself, or no such VM
        vm = state.compute.instances.get(path)
        if vm is None:
            raise errors.not_found(path)
        if worker is not None:
            raise errors.invalid_argument(f"VM {name} is one VM: name it without worker")
        return [vm]
    if worker is None:
        return host.instances
    if not 0 <= worker < len(host.vms):
        raise errors.invalid_argument(f"worker must be 0 to {len(host.vms) - 1} for {name}")
    vm = host.vms[worker]
    if vm is None:
        raise errors.not_found(f"worker {worker} of {name}: its VM is gone")
    return [vm]


def advance(state: State, name: str | None) -> list[str]:
    """The next phase of the maintenance of one node or VM (by path), or of every one."""
    done = []
    for node in state.nodes.values():
        mine = name in (None, node.name) and node.transition is None
        if mine and tpu_maintenance.advance(state, node):
            done.append(node.name)
    for vm in list(state.compute.instances.values()):
        mine = name in (None, vm.path) and vm.transition is None
        if mine and compute_maintenance.advance(state, vm):
            done.append(vm.path)
    return done
