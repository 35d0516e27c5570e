"""Garbage collection: find tpuctl's nodes that should not be billing, and delete them.

Safety rules, enforced here (and for the leftovers of slices in leftovers.py, alike):
- a node without `managed-by=tpuctl` is never a candidate, whatever it looks like;
- a node labelled `tpuctl-keep=true` is never a candidate;
- by default only the current account's nodes (`tpuctl-owner`, `names.Owner`) are considered;
- idleness read from labels is confirmed by probing the node before it counts.

Nodes are those of the Cloud TPU API and of Compute Engine (TPU VMs and slices, by the
labels on their VMs); what killed creates left of slices made of several resources
(`TpuBackend.leftovers`: Compute Engine's), which carries no labels, is
`services/leftovers.py`'s.

`plan` decides on nodes and queued requests; `collect` deletes what a plan dooms and
writes one audit line per action. A plan may be old when it is collected (the user
confirmed minutes later): each node is read again just before its delete, and one that
changed since (kept, relabelled, active, or a new node of the same name) is skipped,
saying so.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tpuctl.agent.labels import expiry
from tpuctl.durations import format_duration
from tpuctl.errors import NotFoundError, ServiceDisabledError, TpuctlError
from tpuctl.models import (
    CREATED,
    IDLE_TIMEOUT,
    KEEP,
    LAST_ACTIVE,
    MANAGED_BY,
    MANAGED_BY_VALUE,
    NODE_DEAD,
    OWNER,
    DeleteResult,
    Node,
    QueuedResource,
)
from tpuctl.services import cost, queued
from tpuctl.services.audit import AuditEntry
from tpuctl.services.audit import append as audit
from tpuctl.services.idle import Busy, IdleProbe
from tpuctl.services.nodes import delete_nodes

if TYPE_CHECKING:
    from tpuctl.cloud.backend import TpuBackend
    from tpuctl.services.leftovers import LeftoverDecision
    from tpuctl.services.names import Owner


def no_probe(node: Node) -> tuple[Busy, str]:
    return "unknown", "no way to look inside the node"


MetricsCheck = Callable[[Node, float], "tuple[Busy, str] | None"]
"""What Cloud Monitoring says of a node against an idle limit; None: no fresh metrics."""


@dataclass
class Decision:
    node: Node
    reason: str
    delete: bool
    evidence: str | None = None  # what an idleness verdict rests on: "metrics" or "probe"

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
    owner: Owner | None,
    idle_limit: float | None,
    probe: IdleProbe = no_probe,
    metrics: MetricsCheck | None = None,
) -> Decision | None:
    """What gc does with one node; None when the node is none of gc's business."""
    if not node.managed:
        return None
    if owner is not None and not owner.owns(node.owner):
        return None
    if node.kept:
        return Decision(node, "kept (tpuctl-keep=true)", False)
    if node.state == "DELETING":
        return Decision(node, "already being deleted", False)
    if node.state in NODE_DEAD:
        return Decision(node, f"{node.state.lower()}: holds quota until deleted", True)
    expires, why = expiry(node.labels)
    if expires is not None and now >= expires:
        flag = "--max-cost" if why.startswith("its max cost") else "--ttl"
        return Decision(node, f"expired {format_duration(now - expires)} ago ({flag})", True)
    limit = idle_limit if idle_limit is not None else node.label_time(IDLE_TIMEOUT)
    if limit is None or node.state != "READY":
        return Decision(node, "in use or within its limits", False)
    # Cloud Monitoring first: it sees a TPU held but left idle, and needs no SSH.
    seen = metrics(node, limit) if metrics is not None else None
    if seen is not None:
        verdict, why = seen
        if verdict == "idle":
            reason = f"idle (limit {format_duration(limit)}): {why} (evidence: metrics)"
            return Decision(node, reason, True, "metrics")
        return Decision(node, f"{why} (evidence: metrics)", False, "metrics")
    since = _idle_since(node)
    if since is None or now - since < limit:
        return Decision(node, "active recently", False)
    verdict, why = probe(node)
    idle_for = format_duration(now - since)
    if verdict == "idle":
        reason = f"idle for {idle_for} (limit {format_duration(limit)}): {why} (evidence: probe)"
        return Decision(node, reason, True, "probe")
    if verdict == "busy":
        return Decision(node, f"labels say idle for {idle_for}, but {why}", False, "probe")
    return Decision(node, f"labels say idle for {idle_for}; not confirmed ({why})", False, "probe")


def plan_nodes(
    nodes: list[Node],
    *,
    owner: Owner | None,
    idle_limit: float | None = None,
    probe: IdleProbe = no_probe,
    metrics: MetricsCheck | None = None,
    now: float | None = None,
) -> list[Decision]:
    """Decisions for every node gc may act on, deletions first."""
    at = time.time() if now is None else now
    decisions = [
        d
        for n in nodes
        if (
            d := decide(n, now=at, owner=owner, idle_limit=idle_limit, probe=probe, metrics=metrics)
        )
        is not None
    ]
    return sorted(decisions, key=lambda d: (not d.delete, d.node.zone, d.node.name))


@dataclass
class QueuedDecision:
    request: QueuedResource
    reason: str


def stale_queued(requests: list[QueuedResource], *, owner: Owner | None) -> list[QueuedDecision]:
    """tpuctl's queued resources that can never give a node any more: FAILED or SUSPENDED."""
    out = []
    for qr in requests:
        if qr.labels.get(MANAGED_BY) != MANAGED_BY_VALUE or qr.labels.get(KEEP) == "true":
            continue
        if owner is not None and not owner.owns(qr.labels.get(OWNER)):
            continue
        if qr.state in ("FAILED", "SUSPENDED"):
            why = qr.error or (
                "its node was preempted or deleted"
                if qr.state == "SUSPENDED"
                else "no reason given"
            )
            out.append(QueuedDecision(qr, f"{qr.state.lower()}: {why}"))
    return out


@dataclass
class Plan:
    """What gc found: a decision per node it may act on, the stale requests, and what
    unfinished creates left of slices (`services/leftovers.py`)."""

    decisions: list[Decision]
    stale: list[QueuedDecision]
    leftovers: list[LeftoverDecision] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # an API that could not be looked at

    @property
    def doomed(self) -> list[Decision]:
        return [d for d in self.decisions if d.delete]

    @property
    def doomed_leftovers(self) -> list[LeftoverDecision]:
        return [d for d in self.leftovers if d.delete]

    @property
    def total(self) -> int:
        """How many resources collecting this plan deletes."""
        return len(self.doomed) + len(self.stale) + len(self.doomed_leftovers)


def plan(
    backends: Sequence[TpuBackend],
    parent: str,
    *,
    owner: Owner | None,
    idle_limit: float | None = None,
    probe: IdleProbe = no_probe,
    metrics: MetricsCheck | None = None,
    now: float | None = None,
) -> Plan:
    """Look at every node and queued request under `parent` (`locations/-`: every zone),
    on each of `backends` (a project with one of them off has nothing there; the errors of
    the one that lists queued requests are the command's),
    and at what unfinished creates left on them."""
    from tpuctl.cloud import registry
    from tpuctl.services import leftovers as left

    at = time.time() if now is None else now
    skipped: list[str] = []
    api = registry.requests_api(backends)
    others = [b for b in backends if b is not api]
    nodes = api.list_nodes(parent)
    for other in others:
        try:
            nodes += other.list_nodes(parent)
        except ServiceDisabledError:
            continue
        except TpuctlError as e:
            skipped.append(f"could not list the TPU VMs of {other.kind.called}: {e}")
    decisions = plan_nodes(
        nodes, owner=owner, idle_limit=idle_limit, probe=probe, metrics=metrics, now=at
    )
    # Requests that can never give a node any more (and hold their place in the queue).
    stale = stale_queued(api.list_queued_resources(parent), owner=owner)
    leftovers, missed = left.plan(backends, parent, owner=owner, now=at)
    return Plan(decisions, stale, leftovers, skipped + missed)


@dataclass
class Collected:
    """How each deletion of a plan went, in the plan's order."""

    nodes: list[tuple[Decision, DeleteResult]]
    requests: list[tuple[QueuedDecision, str | None]]  # None: deleted, else why not
    leftovers: list[tuple[LeftoverDecision, str]] = field(default_factory=list)

    @property
    def failed(self) -> list[str]:
        """The resources still there, each with why (for one error line)."""
        out = [f"{r.name} ({r.message})" for _, r in self.nodes if not r.ok]
        out += [f"{d.label} ({r})" for d, r in self.leftovers if r.startswith("failed")]
        return out + [f"queued resource {q.request.name}" for q, e in self.requests if e]


def collect(
    backends: Sequence[TpuBackend],
    found: Plan,
    *,
    project: str,
    log: Path,
    progress: Callable[[str, str, float], None] | None = None,
) -> Collected:
    """Delete what the plan dooms and append an audit line for each; idempotent. A node
    is deleted through the backend that holds it; leftovers of
    slices after the nodes."""
    from tpuctl.cloud import registry
    from tpuctl.services import leftovers as left

    api = registry.requests_api(backends)
    done: dict[int, DeleteResult] = {}
    for backend in backends:
        mine = [d for d in found.doomed if registry.holder(backends, d.node) is backend]
        if not mine:
            continue
        for d, r in zip(mine, _delete_nodes(backend, mine, progress=progress), strict=True):
            done[id(d)] = r
    results = [done[id(d)] for d in found.doomed]
    for d, r in zip(found.doomed, results, strict=True):
        result = (
            f"skipped: {r.message}" if r.skipped else r.message if r.ok else f"failed: {r.message}"
        )
        audit(
            log,
            AuditEntry.of(
                d.node,
                project=project,
                reason=d.reason,
                hourly=d.hourly,
                result=result,
                evidence=d.evidence,
            ),
        )
    requests: list[tuple[QueuedDecision, str | None]] = []
    for q in found.stale:
        error: str | None = None
        try:
            queued.delete_request(api, q.request.full_name)
        except TpuctlError as e:
            error = str(e)
        requests.append((q, error))
        result = "deleted" if error is None else f"failed: {error}"
        audit(
            log,
            AuditEntry.of(q.request, project=project, reason=q.reason, hourly=None, result=result),
        )
    leftovers = left.collect(found.doomed_leftovers, project=project, log=log)
    return Collected(list(zip(found.doomed, results, strict=True)), requests, leftovers)


def changed_since(api: TpuBackend, d: Decision) -> str | None:
    """Why the node a plan doomed must be left alone now (None: delete it as planned):
    read again, it is another node of that name, or kept, or its labels changed (an
    agent's activity stamp, when the verdict was idleness)."""
    try:
        fresh = api.get_node(d.node.full_name)
    except NotFoundError:
        return None  # gone already: the delete says so
    old = d.node
    if fresh.create_time != old.create_time or fresh.labels.get(CREATED) != old.labels.get(CREATED):
        return "a new node of that name was created since gc looked"
    if fresh.kept:
        return "kept (tpuctl-keep=true) since gc looked"
    steady = {k: v for k, v in fresh.labels.items() if k != LAST_ACTIVE}
    if steady != {k: v for k, v in old.labels.items() if k != LAST_ACTIVE}:
        return "its labels changed since gc looked"
    if d.evidence and fresh.labels.get(LAST_ACTIVE) != old.labels.get(LAST_ACTIVE):
        return "active since gc looked"
    return None


def _delete_nodes(
    api: TpuBackend,
    doomed: list[Decision],
    *,
    progress: Callable[[str, str, float], None] | None = None,
) -> list[DeleteResult]:
    """Delete the doomed nodes, concurrently; gone or going counts as done.

    A node that a queued resource made goes with its request (force delete), so the
    request is not left behind SUSPENDED.
    """
    unsure: dict[str, DeleteResult] = {}  # read again, changed or unreadable: not deleted
    for d in doomed:
        try:
            why = changed_since(api, d)
        except TpuctlError as e:  # what cannot be looked at again is not deleted
            message = f"could not look at it again before deleting: {e}"
            unsure[d.node.full_name] = DeleteResult(d.node.name, False, message, d.node, e)
            continue
        if why:
            unsure[d.node.full_name] = DeleteResult(d.node.name, True, why, d.node, skipped=True)
    deleted = iter(
        delete_nodes(
            api, [d.node for d in doomed if d.node.full_name not in unsure], progress=progress
        )
    )
    results = [unsure.get(d.node.full_name) or next(deleted) for d in doomed]
    for d, result in zip(doomed, results, strict=True):
        request = d.node.queued_resource
        if result.ok and not result.skipped and request:
            try:
                queued.delete_request(api, str(request))
            except TpuctlError as e:
                result.ok, result.message = False, f"node deleted, its queued resource not: {e}"
    return results
