"""The workers' calls on the backend (a mixin of `services.Backend`): the VMs of a node as
the SSH servers and other helpers see them (their homes, roots and host keys:
workers/files.py; libtpu's runtime metrics: workers/chips.py), and the faults and chip
figures the control plane plants on them."""

from __future__ import annotations

from typing import Any

from tpuctl.emulator.compute import hosts as compute_hosts
from tpuctl.emulator.control import api as control_api
from tpuctl.emulator.core import errors
from tpuctl.emulator.core.backend import BackendCore
from tpuctl.emulator.core.locking import locked
from tpuctl.emulator.tpu import nodes as tpu_nodes
from tpuctl.emulator.tpu.models import Node
from tpuctl.emulator.workers import faults as worker_faults
from tpuctl.emulator.workers import libtpu_sdk
from tpuctl.emulator.workers.chips import Chips
from tpuctl.emulator.workers.files import WorkerFiles
from tpuctl.emulator.workers.sandbox import Sandbox


class WorkerCalls(BackendCore):
    storage_endpoint: str | None
    ssh_port: int | None = None  # the workers' SSH port, when SSH is served

    def _start_workers(self, sandbox: Sandbox | None) -> None:
        # homes, roots and host keys of the workers, and how their processes run
        self.workers = WorkerFiles(self._state_dir, sandbox)
        self.chips = Chips()  # libtpu's runtime metrics of each worker (workers/chips.py)
        self.workers.docker.endpoints = self.front_endpoints  # the workers' docker pulls there

    def node_env(self, node: Node, worker: int) -> dict[str, str]:
        """The environment of worker `worker` of `node` (see `worker_env`), as it is now."""
        with self.lock:
            # Cloud Storage: the proxy that checks their tokens (storage/proxy.py)
            config = {**self.state.config(), "storage_endpoint": self.storage_endpoint}
            env = self.workers.env(node, worker, self.endpoint, config)
            worker_faults.install_image(self.workers, node, worker)
            worker_faults.environment(self.workers, node, worker, env)
            # where libtpu serves its runtime metrics on this worker (workers/chips.py);
            # the servers of nodes gone since stop
            hosts: list[Any] = [*self.state.nodes.values(), *compute_hosts.hosts(self.state)]
            self.chips.forget({self.workers.node_marker(n) for n in hosts})
            port = self.chips.port(
                self.workers.marker(node, worker),
                node.accelerator.generation,
                len(self.workers.devices(node, worker)),
            )
            env["TPU_RUNTIME_METRICS_PORTS"] = str(port)
            self.publish_sdk(node, worker)
            return env

    def publish_sdk(self, node: Node, worker: int) -> None:
        """The worker's libtpu SDK stand-in, with its TensorCore figures as they are now."""
        site = worker_faults.site_packages(self.workers, node, worker)
        libtpu_sdk.publish(site, self.chips.tensorcore(self.workers.marker(node, worker)))

    @locked
    def worker_env(self, node_name: str, worker: int) -> dict[str, str]:
        """The environment every process on worker `worker` of a node gets (see
        docs/emulator.md): the TPU VM's variables, its home, and its view of the cloud."""
        node = tpu_nodes.by_name(self.state, node_name)
        if not 0 <= worker < len(node.addresses):
            raise errors.invalid_argument(f"worker {worker} is out of range")
        return self.node_env(node, worker)

    @locked
    def worker_fault(self, body: dict[str, Any]) -> dict:
        """Plant a fault on a worker for `tpuctl doctor NODE` (workers/faults.py); an
        `unhealthy` one is the node's health and symptoms, as `node-state` sets them."""
        node, worker = self._worker_of(body)
        if body.get("kind") != "unhealthy":
            env = self.node_env(node, worker)
            return worker_faults.plant(self.workers, node, worker, body, env)
        if getattr(node, "api", "tpu") == "compute":
            raise errors.failed_precondition(worker_faults.NO_HEALTH)
        if node.state != "READY":
            raise errors.failed_precondition(
                f"Node {node.name} is in state {node.state}, not READY."
            )
        change = worker_faults.unhealthy(str(body["node"]), worker, body)
        target = control_api.set_node_state(self.state, change)
        return {
            "kind": "unhealthy",
            "worker": worker,
            "health": target.health,
            "symptoms": target.symptoms,
        }

    @locked
    def set_chips(self, body: dict[str, Any]) -> dict:
        """Set what a worker's chips show in libtpu's runtime metrics (workers/chips.py)."""
        node, worker = self._worker_of(body)
        chips = body.get("chips")
        if not isinstance(chips, list):
            raise errors.invalid_argument("chips must be a list of {chip, hbm_used, ...}")
        count = len(self.workers.devices(node, worker))
        marker = self.workers.marker(node, worker)
        sdk = body.get("sdk")
        if sdk is not None and not isinstance(sdk, bool):
            raise errors.invalid_argument("sdk must be true or false")
        shown = self.chips.update(marker, node.accelerator.generation, count, chips, sdk)
        self.publish_sdk(node, worker)
        return {"node": body["node"], "worker": worker, "chips": shown, "sdk": sdk is not False}

    def _worker_of(self, body: dict[str, Any]) -> tuple[Any, int]:
        """The node (or host) and worker a control call's body names."""
        node = self._node_or_host(str(body.get("node", "")))
        worker = body.get("worker", 0)
        if not isinstance(worker, int) or not 0 <= worker < len(node.addresses):
            raise errors.invalid_argument(f"worker {worker} is out of range")
        return node, worker

    def _node_or_host(self, name: str) -> Any:
        """The TPU API node `name` (a full name), or the Compute Engine TPU VM or slice of
        that name, as the workers see it (compute/hosts.py)."""
        try:
            return tpu_nodes.by_name(self.state, name)
        except errors.ApiError:
            parts = name.split("/")
            found = (
                compute_hosts.host(self.state, parts[1], parts[3], parts[-1])
                if len(parts) == 6
                else None
            )
            if found is None:
                raise
            return found

    def close(self) -> None:
        """Release what the backend holds outside its state (a temporary workers dir, the
        workers' metrics servers)."""
        self.chips.forget()
        self.workers.close()
