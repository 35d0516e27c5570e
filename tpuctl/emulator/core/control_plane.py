"""The emulator's own plane beside the cloud's APIs, as the backend answers it: the
buckets' records fake-gcs-server does not keep, the control plane (status, config,
reset, faults, transitions, preemption, what a test inspects) and the workers of a node.
A mixin of `Backend`, under the same lock discipline (locking.py)."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from tpuctl.emulator.billing import control as billing_control
from tpuctl.emulator.compute import admission as compute_admission
from tpuctl.emulator.compute import api as compute_api
from tpuctl.emulator.compute import group_api as compute_groups
from tpuctl.emulator.compute import hosts as compute_hosts
from tpuctl.emulator.compute import scheduling as compute_scheduling
from tpuctl.emulator.control import api as control_api
from tpuctl.emulator.control import maintenance as control_maintenance
from tpuctl.emulator.core import errors
from tpuctl.emulator.core.locking import locked
from tpuctl.emulator.core.requests import RequestLog
from tpuctl.emulator.core.state import State
from tpuctl.emulator.core.timestamps import rfc3339
from tpuctl.emulator.monitoring import models as monitoring
from tpuctl.emulator.tpu.models import Node
from tpuctl.emulator.workers import faults as worker_faults
from tpuctl.emulator.workers import libtpu_sdk
from tpuctl.emulator.workers.chips import Chips
from tpuctl.emulator.workers.files import WorkerFiles


class ControlPlane:
    """What the control plane, the storage proxy and the workers ask of the backend."""

    lock: threading.RLock
    state: State
    workers: WorkerFiles
    chips: Chips
    monitoring: monitoring.Monitoring
    requests: RequestLog
    storage_endpoint: str | None
    monitoring_endpoint: str | None
    tpu_grpc_endpoint: str | None
    front_endpoints: dict[str, str]
    ssh_port: int | None
    clear_storage: Callable[[], None] | None
    apply_lifecycle: Callable[[dict[str, Any], float], dict[str, list[str]]] | None
    listeners: list[Callable[[], None]]
    endpoint: str

    def _save(self) -> None:
        raise NotImplementedError  # Backend's (backend.py)

    def node_env(self, node: Node, worker: int) -> dict[str, str]:
        raise NotImplementedError  # Backend's (backend.py)

    def publish_sdk(self, node: Node, worker: int) -> None:
        """The worker's libtpu SDK stand-in, with its TensorCore figures as they are now."""
        site = worker_faults.site_packages(self.workers, node, worker)
        libtpu_sdk.publish(site, self.chips.tensorcore(self.workers.marker(node, worker)))

    # -- Cloud Storage buckets: what fake-gcs-server does not keep (storage/proxy.py) ------
    def bucket_meta(self, bucket: str) -> dict[str, Any]:
        """What the emulator keeps of a bucket: `lifecycle` (storage/lifecycle.py) and
        `metageneration`, where they differ from a new bucket's (none, 1)."""
        with self.lock:
            return copy.deepcopy(self.state.buckets.get(bucket, {}))

    def set_bucket_meta(self, bucket: str, meta: dict[str, Any] | None) -> None:
        """Replace what is kept of a bucket (None: a new or deleted bucket's)."""
        kept = {k: v for k, v in (meta or {}).items() if v}
        with self.lock:
            if kept:
                self.state.buckets[bucket] = copy.deepcopy(kept)
            elif self.state.buckets.pop(bucket, None) is None:
                return
            self._save()

    def run_lifecycle(self, days: float | None = None) -> dict[str, Any]:
        """Apply every bucket's Delete rules as Cloud Storage would `days` from now (0:
        now), and say what went (control plane: `POST storage/lifecycle`)."""
        if days is not None and (
            isinstance(days, bool) or not isinstance(days, (int, float)) or days < 0
        ):
            raise errors.invalid_argument("days must be a number >= 0")
        if self.apply_lifecycle is None:
            raise errors.failed_precondition("this emulator serves no Cloud Storage")
        with self.lock:
            lifecycles = {
                name: meta["lifecycle"]
                for name, meta in self.state.buckets.items()
                if meta.get("lifecycle")
            }
            when = self.state.now() + float(days or 0) * 86400
        return {"at": rfc3339(when), "deleted": self.apply_lifecycle(lifecycles, when)}

    # -- control plane (control/api.py) ----------------------------------------------------
    def draw_fault(self, target: str) -> tuple[float, int | None, bool, bool]:
        """See `control.api.draw_fault` (no transitions: this is no API call yet)."""
        with self.lock:
            return control_api.draw_fault(self.state, target)

    @locked
    def status(self) -> dict:
        return {
            "ok": True,
            "nodes": len(self.state.nodes),
            "defaults": dict(self.state.defaults),
            "storage_endpoint": self.storage_endpoint,  # the proxy (storage/proxy.py)
            "ssh_port": self.ssh_port,
            "caller": self.state.access.caller,
            "monitoring_endpoint": self.monitoring_endpoint,
            "tpu_grpc_endpoint": self.tpu_grpc_endpoint,
            # the services' own ports (service.Front), e.g. `registry_endpoint`
            **{f"{name}_endpoint": address for name, address in self.front_endpoints.items()},
            # the Cloud Billing Catalog API (billing/), served on the emulator's own port
            "billing_endpoint": f"http://{self.endpoint}" if self.endpoint else None,
            "workers_sandbox": self.workers.sandbox.mode,
        }

    @locked
    def config(self) -> dict:
        return self.state.config()

    @locked
    def update_config(self, body: dict[str, Any]) -> dict:
        return self.state.update_config(body)

    @locked
    def reset(self) -> dict:
        self.state.clear()  # the address allocator carries on: addresses are never reused
        for listener in self.listeners:
            listener()  # the workers of the nodes just gone stop before their bucket goes
        if self.clear_storage is not None:
            self.clear_storage()  # every bucket and object goes too
        self.monitoring.clear()  # every point, and the sampling settings
        self.chips.forget()  # the workers' metrics servers (workers/chips.py)
        self.requests.clear()
        return self.status()

    # -- the Cloud Billing Catalog's SKU table (billing/control.py) ------------------------
    @locked
    def billing_skus(self) -> dict:
        return billing_control.list_skus(self.state)

    @locked
    def billing_put_sku(self, sku: Any) -> dict:
        return billing_control.put_sku(self.state, sku)

    @locked
    def billing_delete_sku(self, sku_id: str) -> dict:
        return billing_control.delete_sku(self.state, sku_id)

    @locked
    def faults_config(self) -> dict:
        return asdict(self.state.faults)

    @locked
    def set_faults(self, body: dict[str, Any]) -> dict:
        return control_api.set_faults(self.state, body)

    @locked
    def advance(self, node: str | None = None) -> dict:
        """Complete pending transitions now: of one node, or of all."""
        return control_api.advance(self.state, node)

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
    def all_nodes(self) -> list[Node]:
        return control_api.all_nodes(self.state)

    @locked
    def set_guest_attributes(self, node: str, worker: int, items: list[dict[str, str]]) -> dict:
        return control_api.set_guest_attributes(self.state, node, worker, items)

    @locked
    def set_node_state(self, body: dict[str, Any]) -> Node:
        return control_api.set_node_state(self.state, body)

    @locked
    def preempt(self, node: str, notice: float | None = None) -> Node:
        return control_api.preempt(self.state, node, notice)

    @locked
    def compute_preempt(self, instance: str, notice: float | None = None) -> dict[str, Any]:
        return compute_scheduling.preempt(self.state, instance, notice)

    @locked
    def compute_preempt_worker(
        self, project: str, zone: str, name: str, worker: int | None, notice: float | None
    ) -> dict[str, Any]:
        return compute_scheduling.preempt_worker(self.state, project, zone, name, worker, notice)

    @locked
    def maintenance(self, body: dict[str, Any]) -> dict[str, Any]:
        """Announce a host maintenance on a node or VMs (control/maintenance.py)."""
        return control_maintenance.maintenance(self.state, body)

    @locked
    def compute_reservation(self, body: dict[str, Any]) -> dict[str, Any]:
        return compute_admission.set_reservation(self.state, body)

    # -- workers: the VMs of a node, as the SSH servers and other helpers see them --
    @locked
    def worker_env(self, node_name: str, worker: int) -> dict[str, str]:
        """The environment every process on worker `worker` of a node gets (see
        docs/emulator.md): the TPU VM's variables, its home, and its view of the cloud."""
        node = self.state.node_by_name(node_name)
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
            return self.state.node_by_name(name)
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
