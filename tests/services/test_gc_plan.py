"""gc's plan over nodes and queued requests, and the audit line it writes (no cloud)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tpuctl.cloud import tpu
from tpuctl.cloud.backend import BackendDefaults
from tpuctl.models import Node, QueuedResource, Worker
from tpuctl.services import audit, gc
from tpuctl.services.names import Owner

NOW = 2_000_000_000.0
MINE = {"managed-by": "tpuctl", "tpuctl-owner": "me"}


class Listing(BackendDefaults):
    """The listing calls gc.plan makes, answered from memory (an API with no leftovers)."""

    kind = tpu.KIND

    def __init__(self, nodes: list[Node], requests: list[QueuedResource]) -> None:
        self.nodes, self.requests, self.parents = nodes, requests, []

    def list_nodes(self, parent: str) -> list[Node]:
        self.parents.append(parent)
        return self.nodes

    def list_queued_resources(self, parent: str) -> list[QueuedResource]:
        self.parents.append(parent)
        return self.requests


def node(name: str, labels: dict[str, str], state: str = "READY") -> Node:
    return Node(name, "p", "z", "v3-8", state, labels=labels)


def request(name: str, labels: dict[str, str], state: str) -> QueuedResource:
    return QueuedResource(name, "p", "z", state, labels=labels, error="")


def test_plan_decides_nodes_and_finds_stale_requests_of_the_owner() -> None:
    api = Listing(
        [
            node("fresh", {**MINE, "tpuctl-expires": str(int(NOW) + 60)}),
            node("old", {**MINE, "tpuctl-expires": str(int(NOW) - 120)}),
            node("theirs", {"tpuctl-owner": "me", "tpuctl-expires": "1"}),
        ],
        [
            request("waits", MINE, "WAITING_FOR_RESOURCES"),
            request("gone", MINE, "SUSPENDED"),
            request("alices", {**MINE, "tpuctl-owner": "alice"}, "FAILED"),
        ],
    )
    found = gc.plan([api], "projects/p/locations/-", owner=Owner("me"), now=NOW)  # type: ignore[list-item]
    assert api.parents == ["projects/p/locations/-"] * 2
    assert [(d.node.name, d.delete) for d in found.decisions] == [("old", True), ("fresh", False)]
    assert found.decisions[0].reason == "expired 2m ago (--ttl)"
    assert [(q.request.name, q.reason) for q in found.stale] == [
        ("gone", "suspended: its node was preempted or deleted")
    ]
    assert [d.node.name for d in found.doomed] == ["old"] and found.total == 2


def test_an_audit_line_keeps_its_keys_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audit.time, "time", lambda: 1_800_000_000.0)
    monkeypatch.setattr(audit.socket, "gethostname", lambda: "laptop")
    monkeypatch.setattr(audit, "login_name", lambda: "me")
    log = tmp_path / "state" / "gc.log"
    entry = audit.AuditEntry.of(
        node("old", MINE), project="p", reason="expired", hourly=8.0, result="deleted"
    )
    audit.append(log, entry)
    audit.append(log, entry)
    line = (
        '{"time": "2027-01-15T08:00:00Z", "user": "me", "host": "laptop", "project": "p", '
        '"kind": "node", "zone": "z", "node": "old", "accelerator": "v3-8", '
        '"reason": "expired", "hourly_usd": 8.0, "result": "deleted", "evidence": null}\n'
    )  # evidence: what an idle verdict rested on ("metrics" or "probe"); none for expiry
    assert log.read_text() == line * 2


@pytest.mark.parametrize(
    ("idle", "age", "limit", "verdict"),
    [
        (18.0, 180.0, 60.0, None),  # a point older than the limit: probed, not trusted
        (0.0, 180.0, 60.0, None),  # busy 3 min ago says nothing of the last minute either
        (18.0, 50.0, 60.0, "idle"),  # idle 18 s, 50 s ago, nothing since: 68 s
        (5.0, 50.0, 60.0, "busy"),  # 55 s: under the limit
        (0.0, 10.0, 60.0, "busy"),  # busy 10 s ago
        (90.0, 10.0, 60.0, "idle"),
    ],
)
def test_a_metrics_point_counts_its_age_and_one_older_than_the_limit_is_no_evidence(
    idle: float, age: float, limit: float, verdict: str | None
) -> None:
    from tpuctl.cloud.tpu.rules import TpuRules
    from tpuctl.services.metrics import Seen, WorkerMetrics, idle_check

    n = node("n", MINE)
    n.workers = [Worker(0, "10.0.0.2")]
    worker = (("node_id", "n"), ("project_id", "p"), ("worker_id", "0"), ("zone", "z"))
    seen = Seen({("tpu_worker", worker): WorkerMetrics(idle_seconds=idle, idle_at=NOW - age)})
    said = idle_check(lambda _: seen, [TpuRules()], now=NOW)(n, limit)  # type: ignore[list-item]
    assert (said[0] if said else None) == verdict, said
    if verdict == "idle" and idle < limit:
        assert said is not None and said[1] == (
            "TensorCores idle for 1m on its 1 worker(s) (18s at the last sample, 50s ago)"
        )
