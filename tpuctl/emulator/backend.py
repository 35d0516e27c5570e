"""The emulated Cloud TPU service: state, rules and clock, behind one lock.

Transitions run on wall-clock deadlines stored on each node (so they survive a
restart) and are applied lazily at the start of every call. With a state dir the
whole state is written to `state.json` atomically after every change.
"""

from __future__ import annotations

import functools
import json
import os
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar, cast

from tpuctl.emulator import errors, rules
from tpuctl.emulator.errors import Faults
from tpuctl.emulator.models import TRANSITIONS, AddressAllocator, Node, Operation
from tpuctl.emulator.queued import DURATIONS as QUEUED_DURATIONS
from tpuctl.emulator.queued import QueuedResources
from tpuctl.emulator.quotas import CONFIG_KEYS as QUOTA_CONFIG_KEYS
from tpuctl.emulator.quotas import QuotaConfig
from tpuctl.emulator.workers import WorkerFiles

DEFAULT_DURATIONS: dict[str, float | None] = {
    "create": 1.0,
    "stop": 0.5,
    "start": 0.5,
    "delete": 0.5,
    **QUEUED_DURATIONS,
}
DEFAULT_PROJECT = "tpuctl-demo"
DEFAULT_ZONE = "us-central1-a"
STATE_FILE = "state.json"
MAX_DONE_OPERATIONS = 500

F = TypeVar("F", bound=Callable[..., Any])


def _locked(fn: F) -> F:
    """Run under the lock, after applying due transitions; save if anything changed."""

    @functools.wraps(fn)
    def wrapper(self: Backend, *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            self._tick()
            try:
                return fn(self, *args, **kwargs)
            finally:
                if self._dirty:
                    for listener in self.listeners:
                        listener()  # e.g. the SSH workers follow the new state
                if self._dirty:
                    self._save()

    return cast(F, wrapper)


class Backend:
    """Holds every node and operation of every project and zone, and the rules."""

    def __init__(self, state_dir: Path | str | None = None, clock: Callable[[], float] = time.time):
        self.lock = threading.RLock()
        self._clock = clock
        self._state_dir = Path(state_dir) if state_dir else None
        self.allocator = AddressAllocator()
        # Cloud Storage beside the TPU API (set by EmulatorServer; None: not served)
        self.storage_endpoint: str | None = None
        self.clear_storage: Callable[[], None] | None = None
        # Called under the lock after every change (they may change nodes in turn).
        self.listeners: list[Callable[[], None]] = []
        self.endpoint = ""  # host:port of the HTTP server, set once it listens
        self.ssh_port: int | None = None  # the workers' SSH port, when SSH is served
        self.workers = WorkerFiles(self._state_dir)  # homes and host keys of the workers
        self._clear()
        self._load()

    def _clear(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.operations: dict[str, Operation] = {}
        self.queued = QueuedResources()
        self.durations: dict[str, float | None] = dict(DEFAULT_DURATIONS)
        self.defaults = {"project": DEFAULT_PROJECT, "zone": DEFAULT_ZONE}
        self.faults = Faults()
        self.quota = QuotaConfig()
        self._rng = random.Random()
        self.requests: Counter[str] = Counter()
        self._dirty = True

    # -- persistence ---------------------------------------------------------
    def _save(self) -> None:
        self._dirty = False
        if self._state_dir is None:
            return
        state = {
            "version": 1,
            "nodes": [n.to_state() for n in self.nodes.values()],
            "operations": [op.to_state() for op in self.operations.values()],
            "queued_resources": self.queued.to_state(),
            "config": {
                "durations": self.durations,
                "defaults": self.defaults,
                **self.quota.to_config(),
            },
            "allocator": {"next_index": self.allocator.next_index},
        }
        self._state_dir.mkdir(parents=True, exist_ok=True)
        path = self._state_dir / STATE_FILE
        tmp = path.with_name(f".{STATE_FILE}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(state, indent=1))
        os.replace(tmp, path)

    def _load(self) -> None:
        path = self._state_dir / STATE_FILE if self._state_dir else None
        if path is None or not path.exists():
            return
        state = json.loads(path.read_text())
        self.nodes = {n.name: n for n in map(Node.from_state, state.get("nodes", []))}
        ops = map(Operation.from_state, state.get("operations", []))
        self.operations = {op.name: op for op in ops}
        self.queued.load(state.get("queued_resources", []))
        self.durations.update(state.get("config", {}).get("durations", {}))
        self.defaults.update(state.get("config", {}).get("defaults", {}))
        self.quota.load(state.get("config", {}))
        allocator = state.get("allocator", {})
        self.allocator.next_index = allocator.get("next_index", self.allocator.next_index)

    # -- transitions ---------------------------------------------------------
    def _tick(self) -> None:
        now = self._clock()
        for node in list(self.nodes.values()):
            if node.due(now):
                self._complete(node, now)
        self.queued.tick(self, now)

    def _pending(self, target: str, verb: str | None) -> list[Operation]:
        return [
            op
            for op in self.operations.values()
            if not op.done and op.target == target and op.verb == verb
        ]

    def _complete(self, node: Node, now: float) -> None:
        verb = node.transition
        if verb == "create" and node.capacity_error:
            # The zone ran out: the create fails and the node never comes to be.
            del self.nodes[node.name]
            for op in self._pending(node.name, verb):
                op.fail(now, errors.CODES["RESOURCE_EXHAUSTED"], node.capacity_error)
            self._dirty = True
            return
        gone = node.finish()
        if gone:
            del self.nodes[node.name]
        for op in self._pending(node.name, verb):
            op.succeed(now, None if gone else node)
        self._dirty = True

    def _begin(self, node: Node, verb: str) -> dict[str, Any]:
        now = self._clock()
        if node.transition != verb:
            for op in self._pending(node.name, node.transition):
                message = f"The {op.verb} operation was aborted: the node is being {verb}d."
                op.fail(now, errors.CODES["ABORTED"], message)
            node.begin(verb, now, self.durations[verb])
        op = Operation.new(node, verb, now)
        self._add_operation(op)
        if node.due(now):
            self._complete(node, now)
        return op.to_dict()

    def _add_operation(self, op: Operation) -> None:
        self.operations[op.name] = op
        done = [o for o in self.operations.values() if o.done]
        for old in sorted(done, key=lambda o: o.create_time)[
            : max(0, len(done) - MAX_DONE_OPERATIONS)
        ]:
            del self.operations[old.name]
        self._dirty = True

    # -- lookups -------------------------------------------------------------
    def _node(self, project: str, zone: str, node_id: str, permission: str) -> Node:
        rules.check_zone(project, zone, permission)
        return self._node_by_name(f"projects/{project}/locations/{zone}/nodes/{node_id}")

    def _node_by_name(self, name: str) -> Node:
        node = self.nodes.get(name)
        if node is None:
            raise errors.not_found(name)
        return node

    # -- nodes ---------------------------------------------------------------
    @_locked
    def create_node(self, project: str, zone: str, node_id: str, body: dict[str, Any]) -> dict:
        rules.check_zone(project, zone, "tpu.nodes.create")
        name = f"projects/{project}/locations/{zone}/nodes/{node_id}"
        if node_id and name in self.nodes:
            raise errors.already_exists(name)
        node = rules.new_node(project, zone, node_id, body, self._clock(), self.allocator)
        node.capacity_error = self.quota.admit(node, self.nodes.values())
        self.nodes[name] = node
        return self._begin(node, "create")

    @_locked
    def get_node(self, project: str, zone: str, node_id: str) -> dict:
        return self._node(project, zone, node_id, "tpu.nodes.get").to_dict()

    @_locked
    def list_nodes(self, project: str, zone: str, page_size: int = 0, page_token: str = "") -> dict:
        rules.check_zone(project, zone, "tpu.nodes.list", any_zone=True)
        nodes = sorted(
            (n for n in self.nodes.values() if n.project == project and zone in ("-", n.zone)),
            key=lambda n: n.name,
        )
        page, token = rules.page(nodes, page_size, page_token)
        out: dict[str, Any] = {"nodes": [n.to_dict() for n in page], "unreachable": []}
        if token:
            out["nextPageToken"] = token
        return out

    @_locked
    def delete_node(self, project: str, zone: str, node_id: str) -> dict:
        return self._begin(self._node(project, zone, node_id, "tpu.nodes.delete"), "delete")

    def _power(self, project: str, zone: str, node_id: str, verb: str) -> dict:
        node = self._node(project, zone, node_id, f"tpu.nodes.{verb}")
        acc = node.accelerator
        if acc.multi_host:
            raise errors.failed_precondition(
                f"Cloud TPU received a bad request. {verb.capitalize()} is only available with "
                f"single TPU nodes: {node.name} is a {acc.name} slice of {acc.workers} workers."
            )
        if not node.may_begin(verb):
            wanted = " or ".join(TRANSITIONS[verb].allowed_from or ())
            done = "stopped" if verb == "stop" else "started"
            raise errors.failed_precondition(
                f"Node {node.name} is in state {node.state}: only a node in state {wanted} "
                f"can be {done}."
            )
        return self._begin(node, verb)

    @_locked
    def stop_node(self, project: str, zone: str, node_id: str) -> dict:
        return self._power(project, zone, node_id, "stop")

    @_locked
    def start_node(self, project: str, zone: str, node_id: str) -> dict:
        return self._power(project, zone, node_id, "start")

    @_locked
    def update_node(
        self, project: str, zone: str, node_id: str, update_mask: str, body: dict[str, Any]
    ) -> dict:
        node = self._node(project, zone, node_id, "tpu.nodes.update")
        paths = rules.update_paths(update_mask)
        if node.state == "DELETING":
            raise errors.failed_precondition(f"Node {node.name} is being deleted.")
        rules.apply_update(node, paths, body)
        now = self._clock()
        op = Operation.new(node, "update", now)
        op.succeed(now, node)
        self._add_operation(op)
        return op.to_dict()

    @_locked
    def get_guest_attributes(
        self, project: str, zone: str, node_id: str, body: dict[str, Any]
    ) -> dict:
        node = self._node(project, zone, node_id, "tpu.nodes.get")
        query_path = str(body.get("queryPath") or "")
        entries = [
            {
                "queryPath": query_path,
                "queryValue": {"items": node.query_guest_attributes(w, query_path)},
            }
            for w in rules.worker_ids(body, node.accelerator.workers)
        ]
        return {"guestAttributes": entries}

    # -- operations ----------------------------------------------------------
    @_locked
    def get_operation(self, project: str, zone: str, op_id: str) -> dict:
        rules.check_zone(project, zone, "tpu.operations.get")
        name = f"projects/{project}/locations/{zone}/operations/{op_id}"
        op = self.operations.get(name)
        if op is None:
            raise errors.not_found(name)
        return op.to_dict()

    @_locked
    def list_operations(
        self, project: str, zone: str, page_size: int = 0, page_token: str = ""
    ) -> dict:
        rules.check_zone(project, zone, "tpu.operations.list", any_zone=True)
        ops = sorted(
            (o for o in self.operations.values() if o.project == project and zone in ("-", o.zone)),
            key=lambda o: (o.create_time, o.name),
        )
        page, token = rules.page(ops, page_size, page_token)
        out: dict[str, Any] = {"operations": [o.to_dict() for o in page]}
        if token:
            out["nextPageToken"] = token
        return out

    def delete_operation(self, project: str, zone: str, op_id: str) -> dict:
        self.get_operation(project, zone, op_id)
        return {}  # operations are kept: deleting or cancelling one changes nothing here

    def cancel_operation(self, project: str, zone: str, op_id: str) -> dict:
        return self.delete_operation(project, zone, op_id)

    # -- queued resources (tpuctl/emulator/queued.py) --------------------------
    def now(self) -> float:
        return self._clock()

    def mark_dirty(self) -> None:
        self._dirty = True

    def add_operation(self, op: Operation) -> None:
        self._add_operation(op)

    def begin_create(self, node: Node) -> None:
        self._begin(node, "create")

    def begin_delete(self, node: Node) -> None:
        self._begin(node, "delete")

    @_locked
    def create_queued_resource(
        self, project: str, zone: str, qr_id: str, body: dict[str, Any]
    ) -> dict:
        return self.queued.create(self, project, zone, qr_id, body)

    @_locked
    def get_queued_resource(self, project: str, zone: str, qr_id: str) -> dict:
        return self.queued.get(project, zone, qr_id)

    @_locked
    def list_queued_resources(
        self, project: str, zone: str, page_size: int = 0, page_token: str = ""
    ) -> dict:
        return self.queued.list_page(project, zone, page_size, page_token)

    @_locked
    def delete_queued_resource(self, project: str, zone: str, qr_id: str, force: str) -> dict:
        return self.queued.delete(self, project, zone, qr_id, force.lower() == "true")

    @_locked
    def all_queued(self) -> list[dict]:
        return [q.to_dict() for q in sorted(self.queued.items.values(), key=lambda q: q.name)]

    @_locked
    def queued_control(self, action: str, name: str, message: str | None = None) -> dict:
        """Fail, suspend or provision (ignoring capacity) a queued resource now."""
        return self.queued.control(self, action, name, message)

    # -- Cloud Quotas (tpuctl/emulator/quotas.py) -----------------------------
    @_locked
    def list_quota_infos(
        self, project: str, service: str, page_size: int = 0, page_token: str = ""
    ) -> dict:
        return self.quota.list_infos(project, service, page_size, page_token)

    @_locked
    def get_quota_info(self, project: str, service: str, quota_id: str) -> dict:
        return self.quota.get_info(project, service, quota_id)

    # -- control plane ---------------------------------------------------------
    def count(self, key: str) -> None:
        with self.lock:
            self.requests[key] += 1

    def draw_fault(self, target: str) -> tuple[float, int | None, bool, bool]:
        """For one API call to `target` (path and query): the delay to add, the HTTP status
        to fail with (or None), whether the failure comes after the call took effect, and
        whether a 429 is a quota error."""
        with self.lock:
            f = self.faults
            if f.paths and not re.search(f.paths, target):
                return f.delay, None, False, False
            if f.rate <= 0 or self._rng.random() >= f.rate:
                return f.delay, None, False, False
            code = self._rng.choice(f.codes)
            return f.delay, code, self._rng.random() < f.after_rate, f.quota

    @_locked
    def status(self) -> dict:
        return {
            "ok": True,
            "nodes": len(self.nodes),
            "defaults": dict(self.defaults),
            "storage_endpoint": self.storage_endpoint,
            "ssh_port": self.ssh_port,
        }

    @_locked
    def config(self) -> dict:
        return {
            "durations": dict(self.durations),
            "defaults": dict(self.defaults),
            **self.quota.to_config(),
        }

    @_locked
    def update_config(self, body: dict[str, Any]) -> dict:
        unknown = set(body) - {"durations", "defaults"} - QUOTA_CONFIG_KEYS
        if unknown:
            raise errors.invalid_argument(f"unknown config keys: {sorted(unknown)}")
        durations = body.get("durations") or {}
        for verb, seconds in durations.items():
            if verb not in DEFAULT_DURATIONS:
                raise errors.invalid_argument(f"unknown duration '{verb}'")
            number = isinstance(seconds, (int, float)) and not isinstance(seconds, bool)
            if seconds is not None and not (number and seconds >= 0):
                raise errors.invalid_argument(f"duration '{verb}' must be seconds >= 0 or null")
        defaults = body.get("defaults") or {}
        for key, value in defaults.items():
            if key not in ("project", "zone") or not isinstance(value, str) or not value:
                raise errors.invalid_argument(f"bad default {key}={value!r}")
        self.quota.update(body)
        self.durations.update({k: None if v is None else float(v) for k, v in durations.items()})
        self.defaults.update(defaults)
        self._dirty = True
        return self.config()

    @_locked
    def reset(self) -> dict:
        self._clear()  # the address allocator carries on: addresses are never reused
        if self.clear_storage is not None:
            self.clear_storage()  # every bucket and object goes too
        return self.status()

    @_locked
    def faults_config(self) -> dict:
        return asdict(self.faults)

    @_locked
    def set_faults(self, body: dict[str, Any]) -> dict:
        self.faults = Faults.from_body(body)
        self._rng = random.Random(self.faults.seed)
        return asdict(self.faults)

    @_locked
    def advance(self, node: str | None = None) -> dict:
        """Complete pending transitions now: of one node, or of all."""
        targets = [self._node_by_name(node)] if node else list(self.nodes.values())
        now = self._clock()
        done = []
        for target in targets:
            if target.transition is not None:
                done.append(target.name)
                self._complete(target, now)
        for qr in list(self.queued.items.values()) if not node else []:
            if qr.state in ("CREATING", "ACCEPTED"):  # a held step: due now
                done.append(qr.name)
                qr.deadline = now
                self.queued.step(self, qr, now)
        return {"completed": done}

    @_locked
    def all_nodes(self) -> list[dict]:
        return [n.to_dict() for n in sorted(self.nodes.values(), key=lambda n: n.name)]

    def request_counts(self) -> dict[str, int]:
        with self.lock:
            return dict(self.requests)

    @_locked
    def set_guest_attributes(self, node: str, worker: int, items: list[dict[str, str]]) -> dict:
        """Publish guest attributes (e.g. `hostkeys/ssh-ed25519`) on one worker of a node."""
        target = self._node_by_name(node)
        if not isinstance(worker, int) or not 0 <= worker < len(target.guest_attributes):
            raise errors.invalid_argument(f"worker {worker} is out of range")
        try:
            target.set_guest_attributes(worker, items)
        except (KeyError, TypeError):
            raise errors.invalid_argument("items are {namespace, key, value} objects") from None
        self._dirty = True
        return {"worker": worker, "items": target.guest_attributes[worker]}

    @_locked
    def preempt(self, node: str) -> dict:
        """Preempt a READY spot or preemptible node, as the cloud may at any time."""
        target = self._node_by_name(node)
        if not (target.scheduling.get("preemptible") or target.scheduling.get("spot")):
            raise errors.failed_precondition(f"Node {node} is neither spot nor preemptible.")
        if target.state != "READY":
            raise errors.failed_precondition(f"Node {node} is in state {target.state}, not READY.")
        target.state = "PREEMPTED"
        self._dirty = True
        return target.to_dict()

    # -- workers: the VMs of a node, as the SSH servers and other helpers see them --
    @_locked
    def worker_env(self, node_name: str, worker: int) -> dict[str, str]:
        """The environment every process on worker `worker` of a node gets (see
        docs/emulator.md): the TPU VM's variables, its home, and its view of the cloud."""
        node = self._node_by_name(node_name)
        if not 0 <= worker < len(node.addresses):
            raise errors.invalid_argument(f"worker {worker} is out of range")
        config = {**self.config(), "storage_endpoint": self.storage_endpoint}
        return self.workers.env(node, worker, self.endpoint, config)

    def close(self) -> None:
        """Release what the backend holds outside its state (a temporary workers dir)."""
        self.workers.close()
