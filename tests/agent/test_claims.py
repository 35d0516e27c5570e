"""Whether the job a node's claim names shows life (agent/claims.py): a claim holds the
node only for a job whose client renews its lease or whose agents write heartbeats; a
claim anyone else wrote in the shared bucket holds nothing."""

from __future__ import annotations

import json
import time
from typing import Any

from tpuctl.agent import claims, metadata, net
from tpuctl.agent.protocol import status_path
from tpuctl.agent.storage import READ_LIMIT, Storage

JOB = "20261206-010203-abcdef"
NOW = 1_800_000_000.0


def stamp(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(at))


class Bucket:
    """Objects by name: (value, when written)."""

    def __init__(self, **objects: tuple[Any, float]) -> None:
        self.objects_ = objects

    def objects(self, prefix: str) -> list[dict[str, Any]]:
        return [
            {"name": n, "updated": stamp(at), "size": len(json.dumps(v))}
            for n, (v, at) in self.objects_.items()
            if n.startswith(prefix)
        ]

    def read_json(self, name: str, limit: int = 0) -> tuple[Any, int]:
        return self.objects_[name][0], 1


def alive(bucket: Bucket, job: str = JOB) -> bool:
    return claims.shows_life(bucket, job, stale=60.0, now=NOW)


def test_a_claim_of_a_job_with_no_lease_and_no_agent_holds_nothing() -> None:
    assert not alive(Bucket())  # a claim written by someone else than a client


def test_a_renewed_lease_or_a_heartbeat_is_life() -> None:
    lease = claims.lease(JOB, 90.0, 3, now=NOW - 30)
    assert alive(Bucket(**{claims.lease_path(JOB): (lease, NOW - 30)}))
    assert not alive(Bucket(**{claims.lease_path(JOB): (lease, NOW - 300)}))  # client gone
    running = {"state": "RUNNING", "heartbeat": NOW - 5}
    assert alive(Bucket(**{status_path(JOB, 0): (running, NOW - 5)}))
    assert not alive(Bucket(**{status_path(JOB, 0): (running, NOW - 600)}))  # agent gone
    ended = {"state": "SUCCEEDED", "heartbeat": NOW - 5}
    assert not alive(Bucket(**{status_path(JOB, 0): (ended, NOW - 5)}))


def test_a_forged_lease_of_a_year_is_believed_for_an_hour_at_most() -> None:
    lease = claims.lease(JOB, 365 * 86400.0, 0, now=NOW - 2 * 3600)
    assert not alive(Bucket(**{claims.lease_path(JOB): (lease, NOW - 2 * 3600)}))
    assert alive(Bucket(**{claims.lease_path(JOB): (lease, NOW - 600)}))


def test_a_claim_naming_no_job_id_holds_nothing() -> None:
    lease = claims.lease("x", 90.0, 1, now=NOW)
    assert not alive(Bucket(**{"tpuctl/jobs/x/lease.json": (lease, NOW)}), "x")


def test_renewals_see_the_client_alive_while_its_lease_changes_within_its_length(
    monkeypatch: Any,
) -> None:
    clock = [500.0]
    monkeypatch.setattr(claims.time, "monotonic", lambda: clock[0])
    generation = [1]
    lease = claims.lease(JOB, 90.0, 0)

    class Leased(Bucket):
        def read_json(self, name: str, limit: int = 0) -> tuple[Any, int]:
            return self.objects_[name][0], generation[0]

    client = claims.Renewals(Leased(**{claims.lease_path(JOB): (lease, NOW)}), JOB)
    assert client.alive()  # first seen now
    clock[0] += 80.0
    assert client.alive()
    generation[0] += 1  # renewed: seen again, on this clock
    clock[0] += 20.0
    assert client.alive()
    clock[0] += 91.0  # no new generation for longer than the lease: the client is gone
    assert not client.alive()
    assert not claims.Renewals(Bucket(**{claims.lease_path(JOB): (None, NOW)}), JOB).alive()


def test_renewals_count_a_lease_first_seen_from_when_it_was_written(monkeypatch: Any) -> None:
    """A client killed long before worker 0 first looks: its last lease, written more
    than a lease ago by Cloud Storage's clock, is no sign of life at the first look."""
    now = time.time()
    old = claims.lease(JOB, 90.0, 4, now=now - 120)
    assert not claims.Renewals(Bucket(**{claims.lease_path(JOB): (old, now - 120)}), JOB).alive()
    fresh = claims.lease(JOB, 90.0, 4, now=now - 30)
    assert claims.Renewals(Bucket(**{claims.lease_path(JOB): (fresh, now - 30)}), JOB).alive()


class Endless:
    """A body that never ends (a co-writer's lease of any size), counting what was read."""

    def __init__(self) -> None:
        self.read_bytes = 0

    def read(self, size: int = -1) -> bytes:
        assert size >= 0, "an endless body read whole never returns"
        self.read_bytes += size
        return b" " * size

    def close(self) -> None:
        pass


class NoToken(metadata.Token):
    def headers(self, **extra: str) -> dict[str, str]:
        return dict(extra)


def test_a_lease_of_any_size_is_read_in_bounded_memory_and_is_no_sign_of_life() -> None:
    """A co-writer of the bucket replaces the lease by an endless object: worker 0 reads
    at most a record's bound of it and takes the client for gone; any other object the
    agent reads whole is bounded likewise."""
    bodies: list[Endless] = []

    def sender(*_: Any) -> net.Reply:
        bodies.append(Endless())
        return net.Reply(200, {"x-goog-generation": "7"}, bodies[-1])

    storage = Storage(NoToken(), "bucket", sender=sender)
    assert not claims.Renewals(storage, JOB).alive()
    assert bodies and bodies[0].read_bytes <= claims.RECORD_LIMIT + 1
    try:
        storage.read_json(claims.lease_path(JOB))
        raise AssertionError("an endless object was read as JSON")
    except net.TooLarge as e:
        assert "more than" in str(e)
    assert bodies[-1].read_bytes <= READ_LIMIT + 1
