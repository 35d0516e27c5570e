"""tpuctl's own view of cloud resources: plain data, no Google types.

The cloud adapters build these from the API's JSON; services and the CLI only
ever see these.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, ClassVar

from tpuctl import catalog

# The label names live in the agent package, since the watchdog on the VM reads them
# too; the rest of tpuctl takes them from here.
from tpuctl.agent.labels import (  # noqa: F401
    ATTEMPT_ATTRIBUTE,
    BUCKET_ATTRIBUTE,
    COST_DEADLINE,
    CREATED,
    EXPIRES,
    IDLE_TIMEOUT,
    JOB,
    KEEP,
    LAST_ACTIVE,
    MANAGED_BY,
    MANAGED_BY_VALUE,
    MAX_COST,
    OWNER,
    START_DEADLINE,
)
from tpuctl.catalog import SliceShape
from tpuctl.host_maintenance import Maintenance

if TYPE_CHECKING:
    from tpuctl.startup import Startup

# -- states, declared once ------------------------------------------------------
# A node's state (the TPU API's Node.State), grouped by what it means to a user.
NODE_BOOTING = frozenset({"CREATING", "STARTING", "RESTARTING", "REIMAGING", "REPAIRING"})
NODE_READY = frozenset({"READY"})
NODE_STOPPED = frozenset({"STOPPED", "STOPPING"})  # chips released (billed: none once STOPPED)
NODE_DEAD = frozenset({"PREEMPTED", "TERMINATED"})  # cannot run again: delete and recreate
NODE_GOING = frozenset({"DELETING", "HIDING", "HIDDEN"})
# What a create waiting for READY gives up on: the node will never be ready.
NODE_CREATE_FAILED = NODE_DEAD | {"DELETING", "HIDDEN", "UNKNOWN"}
# A node whose delete has been accepted holds no quota any more.
NODE_HOLDS_NO_QUOTA = catalog.QUOTA_FREE_STATES

# A queued resource's state, grouped likewise.
QUEUED_WAITING = frozenset(
    {"CREATING", "ACCEPTED", "WAITING_FOR_RESOURCES", "PROVISIONING", "STATE_UNSPECIFIED"}
)
QUEUED_ENDED = frozenset({"FAILED", "SUSPENDING", "SUSPENDED"})  # will make no node now
# A request in these states has made no node (a FAILED one never did).
QUEUED_MADE_NO_NODE = frozenset({"CREATING", "ACCEPTED", "WAITING_FOR_RESOURCES", "FAILED"})


@dataclass(frozen=True)
class Worker:
    index: int
    internal_ip: str
    external_ip: str | None = None
    instance_id: str = ""  # on Compute Engine: the worker's VM instance (its id and name)
    instance: str = ""


@dataclass(frozen=True)
class Symptom:
    """Something the cloud noticed about a node (the TPU API's `symptoms`)."""

    kind: str
    details: str = ""
    worker: str = ""


@dataclass
class Node:
    name: str
    project: str
    zone: str
    accelerator_type: str
    state: str
    runtime_version: str = ""
    health: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    metadata: dict[str, str] = field(default_factory=dict)
    workers: list[Worker] = field(default_factory=list)
    create_time: datetime | None = None
    spot: bool = False
    preemptible: bool = False
    reserved: bool = False
    flex_start: bool = False  # a Compute Engine flex-start VM (or slice)
    description: str = ""
    health_description: str = ""
    api: str = "tpu"  # the key of the API that holds it (cloud/registry.py)
    queued_resource: str = ""  # the full name of the queued resource that made it, if any
    symptoms: list[Symptom] = field(default_factory=list)
    maintenance: Maintenance | None = None  # a host maintenance announced on it
    topology: str = ""  # a Compute Engine slice's interconnect: "4x4 ACTIVE" ("" elsewhere)
    shape: SliceShape | None = None  # what the adapter resolved; else from the type's name
    # What is left of a node whose billing parts (its VMs) are gone, when parts that bill
    # nothing remain (a Compute Engine slice's instance template and workload policy once
    # its managed instance group is gone), as a phrase: "its instance template b-d-it and
    # workload policy b-d-wp"; "" for a node. `delete_node` of such a node deletes them.
    free_parts: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False)  # the API's answer, shown by
    # `describe --json` and never read by services

    def __post_init__(self) -> None:
        if self.shape is None:
            self.shape = catalog.shape(self.accelerator_type)

    @property
    def slice(self) -> SliceShape:
        assert self.shape is not None  # set by __post_init__
        return self.shape

    @property
    def full_name(self) -> str:
        return f"projects/{self.project}/locations/{self.zone}/nodes/{self.name}"

    @property
    def managed(self) -> bool:
        return self.labels.get(MANAGED_BY) == MANAGED_BY_VALUE

    @property
    def owner(self) -> str:
        return self.labels.get(OWNER, "")

    @property
    def kept(self) -> bool:
        return self.labels.get(KEEP) == "true"

    def label_time(self, key: str) -> float | None:
        """A label holding unix seconds (tpuctl-created, -expires, -last-active), if valid."""
        try:
            return float(self.labels[key])
        except (KeyError, ValueError):
            return None

    @property
    def scheduling(self) -> str:
        if self.flex_start:
            return "flex-start"
        return "spot" if self.spot else "preemptible" if self.preemptible else "on-demand"

    def age_seconds(self, now: float | None = None) -> float | None:
        if self.create_time is None:
            return None
        return max(0.0, (now or time.time()) - self.create_time.timestamp())

    def to_json(self) -> dict[str, Any]:
        """The stable, script-friendly form printed by `--json`."""
        return {
            "name": self.name,
            "project": self.project,
            "zone": self.zone,
            "acceleratorType": self.accelerator_type,
            "api": self.api,
            "state": self.state,
            "health": self.health,
            "runtimeVersion": self.runtime_version,
            "scheduling": self.scheduling,
            "managed": self.managed,
            "owner": self.owner,
            "createTime": self.create_time.isoformat() if self.create_time else None,
            "labels": self.labels,
            "workers": [
                {"index": w.index, "internalIp": w.internal_ip, "externalIp": w.external_ip}
                for w in self.workers
            ],
            **({"topology": self.topology} if self.topology else {}),
            "upcomingMaintenance": self.maintenance.to_json() if self.maintenance else None,
        }


@dataclass
class QueuedResource:
    """A queued request for TPU nodes: its state and the nodes it asks for."""

    KIND: ClassVar[str] = "queuedResource"  # its `kind` in tpuctl's JSON (list, gc's audit)

    name: str
    project: str
    zone: str
    state: str
    node_ids: list[str] = field(default_factory=list)
    accelerator_type: str = ""
    spot: bool = False
    reserved: bool = False
    labels: dict[str, str] = field(default_factory=dict)
    create_time: datetime | None = None
    valid_until: str = ""  # the queueing policy's limit, as given (duration or time)
    error: str = ""  # why it FAILED
    valid_until_at: datetime | None = None  # when it gives up, from its queueing policy
    api: str = "tpu"  # the key of the API that holds it (cloud/registry.py), as Node.api
    # why a FAILED request failed, as the adapter's typed error (no capacity, quota) where
    # it has one: a create that meets it fails as that error does (zone failover moves on)
    failure: Exception | None = field(default=None, repr=False, compare=False)
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
    flex_start: bool = False
    # how far a request still waiting has come, where its API says more than its state
    # (a Compute Engine multislice: which slices have capacity, which wait for it)
    progress: str = ""

    @property
    def full_name(self) -> str:
        return f"projects/{self.project}/locations/{self.zone}/queuedResources/{self.name}"

    @property
    def scheduling(self) -> str:
        if self.flex_start:
            return "flex-start"
        return "spot" if self.spot else "reserved" if self.reserved else "on-demand"

    def waited_seconds(self, now: float | None = None) -> float | None:
        if self.create_time is None:
            return None
        return max(0.0, (now or time.time()) - self.create_time.timestamp())

    def valid_until_time(self) -> datetime | None:
        """When the request gives up waiting (its validUntilTime, or its creation time plus
        its validUntilDuration); None when it waits for ever."""
        return self.valid_until_at

    def to_json(self) -> dict[str, Any]:
        """The stable, script-friendly form printed by `--json`."""
        return {
            "kind": self.KIND,
            "name": self.name,
            "project": self.project,
            "zone": self.zone,
            "acceleratorType": self.accelerator_type,
            "state": self.state,
            "scheduling": self.scheduling,
            "nodes": list(self.node_ids),
            "createTime": self.create_time.isoformat() if self.create_time else None,
            "validUntil": self.valid_until or None,
            "validUntilTime": _utc(self.valid_until_time()),
            "error": self.error or None,
            "progress": self.progress or None,
            "labels": self.labels,
            "api": self.api,
        }


@dataclass
class DeleteResult:
    """What became of one node or queued resource that was asked to go."""

    name: str
    ok: bool
    message: str
    node: Node | None = None
    error: Exception | None = None  # a TpuctlError (errors.py is above this module)
    skipped: bool = False  # left alone on purpose (ok, and not deleted): `message` says why


def _utc(when: datetime | None) -> str | None:
    """RFC 3339 in UTC, to the second (`2026-11-30T18:00:00Z`)."""
    if when is None:
        return None
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class CreateSpec:
    """What a create asks of a TPU API, in tpuctl's terms: the adapter turns it into the
    API's request body. Services fill in the labels and metadata tpuctl adds
    (`services/node_create.py:prepare`) before the adapter sees it."""

    name: str
    shape: SliceShape
    version: str | None = None
    spot: bool = False
    preemptible: bool = False
    reserved: bool = False
    labels: dict[str, str] = field(default_factory=dict)
    metadata: dict[str, str] = field(default_factory=dict)
    network: str | None = None
    subnetwork: str | None = None
    service_account: str | None = None  # None: the project's default compute account
    scopes: list[str] = field(default_factory=list)  # empty: CLOUD_PLATFORM
    internal_ip_only: bool = False
    tags: list[str] = field(default_factory=list)  # network tags (firewall rules)
    description: str = ""
    ttl: int | None = None  # seconds until gc may delete it
    idle_timeout: int | None = None  # seconds of idleness before it goes
    idle_action: str = "delete"  # what its watchdog does then: delete or stop
    start_deadline: int | None = None  # seconds for a job's agent to start (boot guard)
    max_cost: float | None = None  # USD: deletes itself once it has cost this (--max-cost)
    # Compute Engine: a flex-start VM (it waits for capacity up to `request_valid_for`
    # seconds, then runs `max_run_duration`), and the reservation it must consume
    flex_start: bool = False
    max_run_duration: int | None = None
    request_valid_for: int | None = None
    # a flex-start slice's group, which has no deadline of its own: the seconds it may
    # wait for capacity (--valid-until), after which tpuctl ends the wait for no capacity
    capacity_wait: int | None = None
    reservation: str | None = None
    owner: str = ""  # `tpuctl-owner`: names.owner_label of the account (required to create)
    # the programs its startup-script starts (`prepare` writes the script from it; an
    # adapter that makes several nodes of the request writes each its own)
    startup: Startup | None = None

    @property
    def scheduling(self) -> str:
        """on-demand, spot, preemptible or reserved, as quotas count it."""
        return catalog.scheduling_name(self.spot, self.preemptible, self.reserved)


@dataclass(frozen=True)
class QueueSpec:
    """How a queued request waits (the TPU API's queued resources): for how long, and
    for how many slices."""

    slices: int = 1  # > 1: a multislice request for that many nodes
    valid_until: int | None = None  # seconds it may wait before it FAILS
    valid_until_time: str | None = None  # or until this time (RFC 3339, UTC)
    flex_start: bool = False  # flex-start capacity: runs `max_run_duration` seconds, then goes
    max_run_duration: int | None = None


def slice_ids(name: str, slices: int) -> list[str]:
    """The nodes a request `name` for `slices` slices makes: itself, or `name-0` ...
    `name-N-1` (a multislice queued resource's nodes, named after its `nodeIdPrefix`,
    which tpuctl sets to the request's name; its Compute Engine form names them alike)."""
    return [name] if slices <= 1 else [slice_id(name, i) for i in range(slices)]


def slice_id(name: str, index: int) -> str:
    """Slice `index` of the multislice request `name`: `name-index`."""
    return f"{name}-{index}"


def slice_index(node: str, request: str) -> int | None:
    """Which slice of the multislice request `request` the node `node` is, by its name
    (`slice_id`); None: none of its."""
    head, _, k = node.rpartition("-")
    return int(k) if head == request and k.isascii() and k.isdigit() else None


@dataclass(frozen=True)
class OperationStatus:
    """A long-running operation as services need it: done, and the error it ended with
    (a TpuctlError already classified by the adapter: no capacity, quota, ...)."""

    done: bool
    error: Exception | None = None
