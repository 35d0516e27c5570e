"""tpuctl's own view of cloud resources: plain data, no Google types.

The cloud adapters build these from the API's JSON; services and the CLI only
ever see these.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

# The label names live in the agent package, since the watchdog on the VM reads them
# too; the rest of tpuctl takes them from here.
from tpuctl.agent.labels import (  # noqa: F401
    ATTEMPT_ATTRIBUTE,
    BUCKET_ATTRIBUTE,
    CREATED,
    EXPIRES,
    IDLE_TIMEOUT,
    JOB,
    KEEP,
    LAST_ACTIVE,
    MANAGED_BY,
    MANAGED_BY_VALUE,
    OWNER,
    START_DEADLINE,
)
from tpuctl.timestamps import parse_rfc3339

# Node states grouped by what they mean to a user (the cloud's enum, as data).
PENDING_STATES = frozenset({"CREATING", "STARTING", "RESTARTING", "REIMAGING", "REPAIRING"})
RUNNING_STATES = frozenset({"READY"})
STOPPED_STATES = frozenset({"STOPPED", "STOPPING"})
DEAD_STATES = frozenset({"PREEMPTED", "TERMINATED"})
GONE_STATES = frozenset({"DELETING", "HIDING", "HIDDEN"})


@dataclass(frozen=True)
class Worker:
    index: int
    internal_ip: str
    external_ip: str | None = None


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
    description: str = ""
    health_description: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

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
        return "spot" if self.spot else "preemptible" if self.preemptible else "on-demand"

    def age_seconds(self, now: float | None = None) -> float | None:
        if self.create_time is None:
            return None
        return max(0.0, (now or time.time()) - self.create_time.timestamp())

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> Node:
        """Build from the TPU API's JSON form of a Node (camelCase keys)."""
        parts = data.get("name", "").split("/")
        project, zone, name = (parts[1], parts[3], parts[5]) if len(parts) == 6 else ("", "", "")
        workers = []
        for i, ep in enumerate(data.get("networkEndpoints") or []):
            ext = (ep.get("accessConfig") or {}).get("externalIp") or None
            workers.append(Worker(index=i, internal_ip=ep.get("ipAddress", ""), external_ip=ext))
        created = None
        if data.get("createTime"):
            created = parse_rfc3339(data["createTime"])
        sched = data.get("schedulingConfig") or {}
        return cls(
            name=name,
            project=project,
            zone=zone,
            accelerator_type=data.get("acceleratorType", ""),
            state=data.get("state", "STATE_UNSPECIFIED"),
            runtime_version=data.get("runtimeVersion", ""),
            health=data.get("health", ""),
            labels=dict(data.get("labels") or {}),
            metadata=dict(data.get("metadata") or {}),
            workers=workers,
            create_time=created,
            spot=bool(sched.get("spot")),
            preemptible=bool(sched.get("preemptible")),
            reserved=bool(sched.get("reserved")),
            description=data.get("description", ""),
            health_description=data.get("healthDescription", ""),
            raw=data,
        )

    def to_json(self) -> dict[str, Any]:
        """The stable, script-friendly form printed by `--json`."""
        return {
            "name": self.name,
            "project": self.project,
            "zone": self.zone,
            "acceleratorType": self.accelerator_type,
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
        }


# Queued-resource states grouped by what they mean to a waiting client.
QUEUED_WAITING_STATES = frozenset(
    {"CREATING", "ACCEPTED", "WAITING_FOR_RESOURCES", "PROVISIONING", "STATE_UNSPECIFIED"}
)
QUEUED_ENDED_STATES = frozenset({"FAILED", "SUSPENDING", "SUSPENDED"})


@dataclass
class QueuedResource:
    """A queued request for TPU nodes: its state and the nodes it asks for."""

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
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def full_name(self) -> str:
        return f"projects/{self.project}/locations/{self.zone}/queuedResources/{self.name}"

    @property
    def scheduling(self) -> str:
        return "spot" if self.spot else "reserved" if self.reserved else "on-demand"

    def waited_seconds(self, now: float | None = None) -> float | None:
        if self.create_time is None:
            return None
        return max(0.0, (now or time.time()) - self.create_time.timestamp())

    def valid_until_time(self) -> datetime | None:
        """When the request gives up waiting: its validUntilTime, or its creation time plus
        its validUntilDuration (the API's "21600s" form); None when it waits for ever."""
        policy = self.raw.get("queueingPolicy") or {}
        if policy.get("validUntilTime"):
            return parse_rfc3339(str(policy["validUntilTime"]))
        duration = str(policy.get("validUntilDuration") or "")
        if duration.endswith("s") and self.create_time is not None:
            try:
                return self.create_time + timedelta(seconds=float(duration[:-1]))
            except ValueError:
                return None
        return None

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> QueuedResource:
        """Build from the TPU API's JSON form of a QueuedResource (camelCase keys)."""
        parts = data.get("name", "").split("/")
        project, zone, name = (parts[1], parts[3], parts[5]) if len(parts) == 6 else ("", "", "")
        specs = (data.get("tpu") or {}).get("nodeSpec") or []
        node_ids: list[str] = []
        for spec in specs:
            multi = spec.get("multisliceParams") or {}
            if multi:
                # without a prefix the service names the nodes after the request
                prefix = multi.get("nodeIdPrefix") or name
                count = int(multi.get("nodeCount", 0))
                node_ids += [f"{prefix}-{i}" for i in range(count)]
            else:
                node_ids.append(spec.get("nodeId", ""))
        node = (specs[0].get("node") or {}) if specs else {}
        state = data.get("state") or {}
        error = ((state.get("failedData") or {}).get("error") or {}).get("message", "")
        policy = data.get("queueingPolicy") or {}
        created = None
        if data.get("createTime"):
            created = parse_rfc3339(data["createTime"])
        sched = node.get("schedulingConfig") or {}
        return cls(
            name=name,
            project=project,
            zone=zone,
            state=state.get("state", "STATE_UNSPECIFIED"),
            node_ids=node_ids,
            accelerator_type=node.get("acceleratorType", ""),
            spot="spot" in data or bool(sched.get("spot")),
            reserved=bool(data.get("reservationName") or sched.get("reserved")),
            labels=dict(node.get("labels") or {}),
            create_time=created,
            valid_until=policy.get("validUntilTime") or policy.get("validUntilDuration") or "",
            error=error,
            raw=data,
        )

    def to_json(self) -> dict[str, Any]:
        """The stable, script-friendly form printed by `--json`."""
        return {
            "kind": "queuedResource",
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
            "labels": self.labels,
        }


@dataclass
class DeleteResult:
    """What became of one node or queued resource that was asked to go."""

    name: str
    ok: bool
    message: str
    node: Node | None = None
    error: Exception | None = None  # a TpuctlError (errors.py is above this module)


def _utc(when: datetime | None) -> str | None:
    """RFC 3339 in UTC, to the second (`2026-11-30T18:00:00Z`)."""
    if when is None:
        return None
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
