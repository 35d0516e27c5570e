"""The emulated cloud as the server, the SSH workers and the tests see it: one lock over
the state (`state.State`) and the modules that work on it. This module answers the
cloud's APIs; control_plane.py (a mixin) the control plane, the buckets' records and the
workers.

Invariants:
- Every public method takes the lock; those marked `@locked` (locking.py) also apply the
  transitions that are due first, and after the call, if anything changed, tell the listeners (which
  may change nodes in turn) and write the state (`persistence`).
- Listeners run under the lock: they read the state through `nodes`, `node_env`,
  `logins` and `publish`, which never apply transitions, so a listener cannot change the state under
  the feet of the call that triggered it.
- The API methods answer model objects (`tpu.models`), which each service's front renders
  as its wire format (`tpu.front`) under the lock; errors are `errors.ApiError`s.
"""

from __future__ import annotations

import threading
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tpuctl.emulator.compute import hosts as compute_hosts
from tpuctl.emulator.compute import scheduling as compute_scheduling
from tpuctl.emulator.compute.hosts import ComputeHost
from tpuctl.emulator.core import persistence
from tpuctl.emulator.core.control_plane import ControlPlane
from tpuctl.emulator.core.locking import locked
from tpuctl.emulator.core.requests import RequestLog
from tpuctl.emulator.core.state import State
from tpuctl.emulator.iam import oslogin
from tpuctl.emulator.monitoring import models as monitoring
from tpuctl.emulator.quotas import preferences as quota_prefs
from tpuctl.emulator.services import SERVICES, slots
from tpuctl.emulator.tpu import api as tpu_api
from tpuctl.emulator.tpu import maintenance as tpu_maintenance
from tpuctl.emulator.tpu import queued
from tpuctl.emulator.tpu.models import Node, Operation, Page, QueuedResource
from tpuctl.emulator.workers import faults as worker_faults
from tpuctl.emulator.workers.chips import Chips
from tpuctl.emulator.workers.files import WorkerFiles
from tpuctl.emulator.workers.sandbox import Sandbox


class Backend(ControlPlane):
    """Holds every node and operation of every project and zone, and the rules."""

    def __init__(
        self,
        state_dir: Path | str | None = None,
        clock: Callable[[], float] = time.time,
        sandbox: Sandbox | None = None,
    ):
        self.lock = threading.RLock()
        # Notified (under the lock) after every change of the state.
        self.changes = threading.Condition(self.lock)
        self._state_dir = Path(state_dir) if state_dir else None
        self.state = State(clock, slots())
        # Cloud Storage beside the TPU API (set by EmulatorServer; None: not served)
        self.storage_endpoint: str | None = None
        self.clear_storage: Callable[[], None] | None = None
        # deletes what buckets' lifecycle rules remove at a time (storage.server.StorageServer)
        self.apply_lifecycle: Callable[[dict[str, Any], float], dict[str, list[str]]] | None = None
        # Called under the lock after every change (they may change nodes in turn).
        self.listeners: list[Callable[[], None]] = []
        self.endpoint = ""  # host:port of the HTTP server, set once it listens
        self.ssh_port: int | None = None  # the workers' SSH port, when SSH is served
        # homes, roots and host keys of the workers, and how their processes run
        self.workers = WorkerFiles(self._state_dir, sandbox)
        self.chips = Chips()  # libtpu's runtime metrics of each worker (workers/chips.py)
        persistence.load(self.state, self._state_dir)
        # Cloud Monitoring: samples of the workers (monitoring/models.py); its gRPC address
        self.monitoring = monitoring.Monitoring(self._monitored)
        self.monitoring_endpoint: str | None = None
        self.tpu_grpc_endpoint: str | None = None  # the TPU API over gRPC (tpu/grpc_front.py)
        # the services' own ports (service.Front) by name, and their addresses
        self.fronts = types.SimpleNamespace()
        self.front_endpoints: dict[str, str] = {}
        self.workers.docker.endpoints = self.front_endpoints  # the workers' docker pulls there
        self.requests = RequestLog()  # counts and bodies of the API calls, for the control plane

    def _monitored(self) -> list[monitoring.WorkerView]:
        with self.lock:  # no transitions applied: a sample is no API call
            hosts = compute_hosts.hosts(self.state)
            return monitoring.worker_views(
                self.state.nodes.values(), self.workers, self.chips
            ) + monitoring.compute_worker_views(hosts, self.workers, self.chips)

    def _save(self) -> None:
        persistence.save(self.state, self._state_dir)

    def _tick(self) -> None:
        now = self.state.now()
        for service in SERVICES:
            for tick in service.ticks:
                tick(self.state, now)

    @locked
    def tick(self) -> None:
        """Apply the transitions that are due, and tell the listeners (the SSH workers, the
        startup scripts): the server's ticker calls it between requests."""

    # -- what listeners read, under the lock (no transitions applied) ---------------
    @property
    def nodes(self) -> dict[str, Node]:
        """Every node by full name; read it with the lock held (listeners do)."""
        return self.state.nodes

    @property
    def compute_hosts(self) -> list[ComputeHost]:
        """Compute Engine's TPU VMs and slices as the workers see a node (compute/hosts.py);
        read it with the lock held."""
        return compute_hosts.hosts(self.state)

    @property
    def operations(self) -> dict[str, Operation]:
        return self.state.operations

    def follow(self, listener: Callable[[], None]) -> None:
        """Call `listener` now and after every change, under the lock; save what it did."""
        with self.lock:
            self.listeners.append(listener)
            listener()
            self._save()

    def unfollow(self, listener: Callable[[], None]) -> None:
        with self.lock:
            if listener in self.listeners:
                self.listeners.remove(listener)

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

    def logins(self, node: Node) -> frozenset[oslogin.Login]:
        """Who may log in to the workers of `node` with which key (ssh-keys, or OS Login)."""
        with self.lock:
            return oslogin.logins(self.state, node.metadata, node.project)

    def publish(self, node: Node, worker: int, items: list[dict[str, str]]) -> None:
        """Publish guest attributes on a worker of `node`, as its guest agent would."""
        with self.lock:
            if any(item not in node.guest_attributes[worker] for item in items):
                node.set_guest_attributes(worker, items)
                self.state.changed()

    # -- nodes and operations (tpu/api.py) ---------------------------------------------
    @locked
    def create_node(self, project: str, zone: str, node_id: str, body: dict[str, Any]) -> Operation:
        return tpu_api.create_node(self.state, project, zone, node_id, body)

    @locked
    def get_node(self, project: str, zone: str, node_id: str) -> Node:
        return tpu_api.get_node(self.state, project, zone, node_id)

    @locked
    def guest_view(self, project: str, zone: str, node_id: str) -> tuple[Node, bool]:
        """What a worker's metadata server shows: the node, and whether its preemption
        notice has begun (it still looks READY then)."""
        node = self.state.node(project, zone, node_id, "tpu.nodes.get")
        return node, node.transition == "preempt" or node.state == "PREEMPTED"

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
    def list_nodes(self, project: str, zone: str, page_size: int = 0, page_token: str = "") -> Page:
        return tpu_api.list_nodes(self.state, project, zone, page_size, page_token)

    @locked
    def delete_node(self, project: str, zone: str, node_id: str) -> Operation:
        return tpu_api.delete_node(self.state, project, zone, node_id)

    @locked
    def stop_node(
        self, project: str, zone: str, node_id: str, body: dict[str, Any] | None = None
    ) -> Operation:
        return tpu_api.power(self.state, project, zone, node_id, "stop", body or {})

    @locked
    def start_node(
        self, project: str, zone: str, node_id: str, body: dict[str, Any] | None = None
    ) -> Operation:
        return tpu_api.power(self.state, project, zone, node_id, "start", body or {})

    @locked
    def perform_maintenance(self, project: str, zone: str, node_id: str) -> Operation:
        node = self.state.node(project, zone, node_id, "tpu.nodes.update")
        return tpu_maintenance.perform(self.state, node, simulate=False)

    @locked
    def simulate_maintenance_event(
        self, project: str, zone: str, node_id: str, body: dict[str, Any] | None = None
    ) -> Operation:
        node = self.state.node(project, zone, node_id, "tpu.nodes.update")
        return tpu_maintenance.perform(self.state, node, simulate=True)

    @locked
    def update_node(
        self, project: str, zone: str, node_id: str, update_mask: str, body: dict[str, Any]
    ) -> Operation:
        return tpu_api.update_node(self.state, project, zone, node_id, update_mask, body)

    @locked
    def get_guest_attributes(
        self, project: str, zone: str, node_id: str, body: dict[str, Any]
    ) -> tuple[str, list[list[dict[str, str]]]]:
        return tpu_api.get_guest_attributes(self.state, project, zone, node_id, body)

    @locked
    def get_operation(self, project: str, zone: str, op_id: str) -> Operation:
        return tpu_api.get_operation(self.state, project, zone, op_id)

    @locked
    def list_operations(
        self, project: str, zone: str, page_size: int = 0, page_token: str = ""
    ) -> Page:
        return tpu_api.list_operations(self.state, project, zone, page_size, page_token)

    # -- queued resources (tpu/queued.py) --------------------------------------------------
    @locked
    def create_queued_resource(
        self,
        project: str,
        zone: str,
        qr_id: str,
        body: dict[str, Any],
        alpha: dict[str, Any] | None = None,
    ) -> Operation:
        return queued.create(self.state, project, zone, qr_id, body, alpha)

    @locked
    def get_queued_resource(self, project: str, zone: str, qr_id: str) -> QueuedResource:
        return queued.get(self.state, project, zone, qr_id)

    @locked
    def list_queued_resources(
        self, project: str, zone: str, page_size: int = 0, page_token: str = ""
    ) -> Page:
        return queued.list_page(self.state, project, zone, page_size, page_token)

    @locked
    def delete_queued_resource(
        self, project: str, zone: str, qr_id: str, force: bool = False
    ) -> Operation:
        return queued.delete(self.state, project, zone, qr_id, force)

    @locked
    def all_queued(self) -> list[QueuedResource]:
        return queued.all_requests(self.state)

    @locked
    def queued_control(self, action: str, name: str, message: str | None = None) -> QueuedResource:
        """Fail, suspend or provision (ignoring capacity) a queued resource now."""
        return queued.control(self.state, action, name, message)

    # -- Cloud Quotas (quotas/limits.py) ---------------------------------------------------
    @locked
    def list_quota_infos(
        self, project: str, service: str, page_size: int = 0, page_token: str = ""
    ) -> dict:
        return self.state.quota.list_infos(project, service, page_size, page_token)

    @locked
    def get_quota_info(self, project: str, service: str, quota_id: str) -> dict:
        return self.state.quota.get_info(project, service, quota_id)

    # -- the APIs written as functions over the state (quotas/service_usage.py, ...) --
    @locked
    def apply(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run an API function `fn(state, *args)` under the lock (routes of `routes.OnState`)."""
        return fn(self.state, *args)

    @locked
    def decide_quota_preference(self, name: str, granted: Any) -> dict:
        return quota_prefs.decide(self.state, name, granted)

    @locked
    def admit(
        self, verb: str, project: str, path: str, principal: Any = None, write: bool = True
    ) -> None:
        """The gate before every API call (iam/access.py): refuse it as the cloud's front end
        would, for a token without the scope, an API off, no billing or a missing
        permission (the caller's, or the VM's service account's: `principal`)."""
        with self.lock:
            self.state.access.check(
                verb, project, path, self.state.quota.api, principal=principal, write=write
            )

    def principal(self, authorization: str | None) -> Any:
        """The VM's service account behind a bearer token (iam.Principal), or None."""
        with self.lock:
            return self.state.access.accounts.principal(authorization)

    @locked
    def mint_token(self, account: str, scopes: list[str], project: str) -> str:
        """A token for a worker of `project` whose node runs as `account` (metadata/server.py),
        saved: it outlives a restart (persistence.py)."""
        self.state.dirty = True
        return self.state.access.accounts.mint(account, scopes, project)

    def caller_storage_denied(self, permission: str) -> str | None:
        """The caller's account when the config denies it a Cloud Storage permission."""
        with self.lock:
            access = self.state.access
            return access.caller if permission in access.denied else None

    def storage_denied(self, principal: Any, permission: str) -> bool:
        """Whether the VM's account lacks a Cloud Storage permission."""
        with self.lock:
            return permission in self.state.access.accounts.denied(principal.account)

    def close(self) -> None:
        """Release what the backend holds outside its state (a temporary workers dir, the
        workers' metrics servers)."""
        self.chips.forget()
        self.workers.close()
