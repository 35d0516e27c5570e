"""Garbage collection: find tpuctl's nodes that should not be billing, and delete them.

Safety rules, enforced here and nowhere else:
- a node without `managed-by=tpuctl` is never a candidate, whatever it looks like;
- a node labelled `tpuctl-keep=true` is never a candidate;
- by default only the current user's nodes (`tpuctl-owner`) are considered;
- idleness read from labels is confirmed by probing the node before it counts.
"""

from __future__ import annotations

import getpass
import json
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tpuctl.durations import format_duration
from tpuctl.errors import TpuctlError
from tpuctl.models import (
    CREATED,
    DEAD_STATES,
    EXPIRES,
    IDLE_TIMEOUT,
    KEEP,
    LAST_ACTIVE,
    MANAGED_BY,
    MANAGED_BY_VALUE,
    OWNER,
    DeleteResult,
    Node,
    QueuedResource,
)
from tpuctl.services import cost
from tpuctl.services.idle import Busy, IdleProbe

if TYPE_CHECKING:
    from tpuctl.cloud.tpu import TpuApi


def no_probe(node: Node) -> tuple[Busy, str]:
    return "unknown", "no way to look inside the node"


@dataclass
class Decision:
    node: Node
    reason: str
    delete: bool

    @property
    def hourly(self) -> float | None:
        return cost.node_hourly(self.node)


def _idle_since(node: Node) -> float | None:
    """When the node was last known active: the agent's label, else its creation."""
    last = node.label_time(LAST_ACTIVE)
    if last is not None:
        return last
    created = node.label_time(CREATED)
    if created is not None:
        return created
    return node.create_time.timestamp() if node.create_time else None


def decide(
    node: Node,
    *,
    now: float,
    owner: str | None,
    idle_limit: float | None,
    probe: IdleProbe = no_probe,
) -> Decision | None:
    """What gc does with one node; None when the node is none of gc's business."""
    if not node.managed:
        return None
    if owner is not None and node.owner != owner:
        return None
    if node.kept:
        return Decision(node, "kept (tpuctl-keep=true)", False)
    if node.state == "DELETING":
        return Decision(node, "already being deleted", False)
    if node.state in DEAD_STATES:
        return Decision(node, f"{node.state.lower()}: holds quota until deleted", True)
    expires = node.label_time(EXPIRES)
    if expires is not None and now >= expires:
        return Decision(node, f"expired {format_duration(now - expires)} ago (--ttl)", True)
    limit = idle_limit if idle_limit is not None else node.label_time(IDLE_TIMEOUT)
    if limit is None or node.state != "READY":
        return Decision(node, "in use or within its limits", False)
    since = _idle_since(node)
    if since is None or now - since < limit:
        return Decision(node, "active recently", False)
    verdict, why = probe(node)
    idle_for = format_duration(now - since)
    if verdict == "idle":
        return Decision(node, f"idle for {idle_for} (limit {format_duration(limit)}): {why}", True)
    if verdict == "busy":
        return Decision(node, f"labels say idle for {idle_for}, but {why}", False)
    return Decision(node, f"labels say idle for {idle_for}; not confirmed ({why})", False)


def plan(
    nodes: list[Node],
    *,
    owner: str | None,
    idle_limit: float | None = None,
    probe: IdleProbe = no_probe,
    now: float | None = None,
) -> list[Decision]:
    """Decisions for every node gc may act on, deletions first."""
    at = time.time() if now is None else now
    decisions = [
        d
        for n in nodes
        if (d := decide(n, now=at, owner=owner, idle_limit=idle_limit, probe=probe)) is not None
    ]
    return sorted(decisions, key=lambda d: (not d.delete, d.node.zone, d.node.name))


def collect(
    api: TpuApi,
    decisions: list[Decision],
    *,
    progress: Callable[[str, str, float], None] | None = None,
) -> list[DeleteResult]:
    """Delete what the plan says, concurrently; idempotent (gone or going counts as done).

    A node that a queued resource made goes with its request (force delete), so the
    request is not left behind SUSPENDED.
    """
    from tpuctl.services import queued
    from tpuctl.services.nodes import delete_nodes

    doomed = [d.node for d in decisions if d.delete]
    results = delete_nodes(api, doomed, progress=progress)
    for node, result in zip(doomed, results, strict=True):
        request = node.raw.get("queuedResource")
        if result.ok and request:
            try:
                queued.delete_request(api, str(request))
            except TpuctlError as e:
                result.ok, result.message = False, f"node deleted, its queued resource not: {e}"
    return results


@dataclass
class QueuedDecision:
    request: QueuedResource
    reason: str


def stale_queued(requests: list[QueuedResource], *, owner: str | None) -> list[QueuedDecision]:
    """tpuctl's queued resources that can never give a node any more: FAILED or SUSPENDED."""
    out = []
    for qr in requests:
        if qr.labels.get(MANAGED_BY) != MANAGED_BY_VALUE or qr.labels.get(KEEP) == "true":
            continue
        if owner is not None and qr.labels.get(OWNER) != owner:
            continue
        if qr.state in ("FAILED", "SUSPENDED"):
            why = qr.error or (
                "its node was preempted or deleted"
                if qr.state == "SUSPENDED"
                else "no reason given"
            )
            out.append(QueuedDecision(qr, f"{qr.state.lower()}: {why}"))
    return out


def audit(path: Path, decision: Decision, result: str, project: str) -> None:
    """Append one JSON line for a node gc acted on to the audit log."""
    n = decision.node
    audit_entry(
        path,
        project,
        "node",
        n.name,
        n.zone,
        n.accelerator_type,
        decision.reason,
        decision.hourly,
        result,
    )


def audit_entry(
    path: Path,
    project: str,
    kind: str,
    name: str,
    zone: str,
    accelerator: str,
    reason: str,
    hourly: float | None,
    result: str,
) -> None:
    """Append one JSON line per action to the audit log (created with its folder)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = os.environ.get("USER", "unknown")
    entry = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "user": user,
        "host": socket.gethostname(),
        "project": project,
        "kind": kind,
        "zone": zone,
        "node": name,
        "accelerator": accelerator,
        "reason": reason,
        "hourly_usd": hourly,
        "result": result,
    }
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")
