"""Which job a node belongs to right now (its claim), and whether the client of a job is
still alive (its start lease): two small objects in the job's bucket that the laptop and
the agent both read. Standard library only, Python 3.8+: it travels in the agent bundle.

    tpuctl/nodes/<project>/<zone>/<node>/claim.json   the job that holds the node
    tpuctl/jobs/<job-id>/lease.json                   renewed by the living client

A claim is taken by creating its object with `ifGenerationMatch=0` (only one writer can),
taken over from a stale holder by rewriting it with `ifGenerationMatch=<its generation>`,
and released by deleting it with the generation it was written with: a claim someone
else took meanwhile is never released by mistake. It names the node's `createTime`: a
node deleted and made again under the same name is not the node that was claimed.

The TPU API's labels would be the other place for a claim, but its `nodes.patch` takes
no fingerprint or etag (Compute Engine's `setLabels` does): two clients that read "no
claim" would both write theirs, and the last would win without either knowing.
"""

from __future__ import annotations

import calendar
import contextlib
import re
import time
from typing import Any, Dict

from .labels import number
from .net import HttpError
from .protocol import JOB_ID_RE, ROOT, is_final, job_path, status_prefix

Json = Dict[str, Any]

NODES = ROOT + "nodes/"
START_LEASE = 90.0  # seconds: the client's lease when its own cannot be read (run/spec.py)
MAX_LEASE = 3600.0  # seconds: the longest lease a client takes (a longer one is not believed)
RECORD_LIMIT = 1 << 20  # bytes: a lease or status larger than this is not read


def claim_path(project: str, zone: str, node: str) -> str:
    return f"{NODES}{project}/{zone}/{node}/claim.json"


def lease_path(job_id: str) -> str:
    return job_path(job_id, "lease.json")


def claim(job_id: str, node_created: str, user: str, host: str, now: float | None = None) -> Json:
    """What a job writes at `claim_path` to hold the node."""
    at = round(time.time() if now is None else now, 3)
    return {"job": job_id, "node_created": node_created, "user": user, "host": host, "claimed": at}


def created_seconds(value: Any) -> str:
    """A node's create time as whole unix seconds ('' when unknown), from RFC 3339 as the
    agent reads it (the TPU API's `createTime` in UTC, Compute Engine's
    `creationTimestamp` with its offset, `2026-12-01T01:30:05.123-08:00`) or from seconds
    (as the laptop has it)."""
    text = str(value or "")
    if text.isdigit() or not text:
        return text
    zone = re.search(r"([+-])(\d\d):?(\d\d)$", text[19:])
    offset = 0
    if zone:
        offset = (int(zone.group(2)) * 3600 + int(zone.group(3)) * 60) * (
            -1 if zone.group(1) == "-" else 1
        )
    try:
        return str(calendar.timegm(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S")) - offset)
    except ValueError:
        return ""


def holder(value: Json | None, node_created: str) -> str:
    """The job holding the node by this claim ('' when none: no claim, or a claim of an
    earlier node of that name)."""
    if not value or not value.get("job"):
        return ""
    mine, theirs = created_seconds(node_created), created_seconds(value.get("node_created"))
    if mine and theirs and mine != theirs:
        return ""
    return str(value["job"])


def lease(job_id: str, seconds: float, renewals: int, now: float | None = None) -> Json:
    """What the living client writes at `lease_path` every third of `seconds`."""
    at = round(time.time() if now is None else now, 3)
    return {"job": job_id, "seconds": seconds, "renewals": renewals, "renewed": at}


class Renewals:
    """The job's client as a VM sees it: alive while a new generation of its lease has
    been seen within the lease's length, on this VM's monotonic clock (the client's clock
    is never read). A generation seen for the first time counts from when Cloud Storage
    says it was written (as `shows_life` reads it), so a client already dead at the first
    look is not believed alive for another lease. A lease that cannot be read, or none,
    is no sign of life."""

    def __init__(self, storage: Any, job_id: str) -> None:
        self.storage, self.job_id = storage, job_id
        self.seen: tuple[int, float] | None = None  # (generation, when first seen here)

    def alive(self) -> bool:
        try:
            value, generation = self.storage.read_json(lease_path(self.job_id), RECORD_LIMIT)
        except (HttpError, OSError, ValueError):
            return False
        seconds = number((value or {}).get("seconds"))
        if not value or not generation or not seconds or seconds <= 0:
            return False
        now = time.monotonic()
        if self.seen is None or self.seen[0] != generation:
            self.seen = (generation, now - self._age())
        return now - self.seen[1] <= min(seconds, MAX_LEASE)

    def _age(self) -> float:
        """Seconds since the lease was written, by its `updated` time (0: unknown)."""
        from .monitoring import rfc3339

        name = lease_path(self.job_id)
        try:
            listed = [o for o in self.storage.objects(name) if o.get("name") == name]
        except (HttpError, OSError, ValueError):
            return 0.0
        updated = rfc3339(listed[0].get("updated")) if listed else None
        return 0.0 if updated is None else max(0.0, time.time() - updated)


# -- on the VM: worker 0's agent at the end of a job ------------------------------------
def other_holder(storage: Any, me: Json, job_id: str, node_created: str = "") -> str:
    """The other job that holds this worker's node by its claim ('' when none, or this
    job): the agent's teardown leaves such a node to it."""
    value, _ = storage.read_json(claim_path(me["project"], me["zone"], me["node"]))
    who = holder(value, node_created)
    return "" if who == job_id else who


def release(storage: Any, me: Json, job_id: str) -> bool:
    """Delete this job's claim on the node, if it still holds it (the generation read is
    the one deleted: a claim taken over meanwhile stays)."""
    name = claim_path(me["project"], me["zone"], me["node"])
    value, generation = storage.read_json(name)
    if not value or value.get("job") != job_id:
        return False
    return bool(storage.delete(name, generation))


def taken_by(storage: Any, me: Json, job_id: str, say: Any, node: Any, stale: float) -> str:
    """The other job holding this worker's node ('' when none, or this job), by the
    create time its API gives (`node`: target.py's, whichever API holds it), if that job
    shows life (`shows_life`). A claim that cannot be read counts as none: a teardown
    never leaves a node billing on a guess about the bucket (`say` tells the job's log
    so)."""
    from .net import HttpError

    created = ""  # unknown: the claim's job decides alone
    with contextlib.suppress(HttpError, ValueError):
        created = node.created()
    try:
        other = other_holder(storage, me, job_id, created)
        if other and not shows_life(storage, other, stale):
            say(
                f"teardown: the node's claim names job {other}, which shows no life (no "
                "client's lease, no agent's heartbeat): deleting it"
            )
            return ""
        return other
    except (HttpError, ValueError) as e:
        say(f"teardown: the node's claim could not be read ({e}): deleting it")
        return ""


def shows_life(storage: Any, job_id: str, stale: float, now: float | None = None) -> bool:
    """Whether job `job_id` shows life: its client's lease renewed within the lease's
    seconds, or a worker not ended whose status was written within `stale` seconds (the
    laptop's test too, services/run/lease.py). A claim of a job that shows none holds
    nothing: it is stale, or someone else than a client wrote it (the bucket is shared;
    a client writes its lease before it claims a node)."""
    from .monitoring import rfc3339
    from .net import HttpError

    if not JOB_ID_RE.match(job_id):
        return False
    now = time.time() if now is None else now
    objects = {o["name"]: o for o in storage.objects(job_path(job_id, ""))}

    def age(name: str) -> float:
        updated = rfc3339((objects.get(name) or {}).get("updated"))
        return float("inf") if updated is None else now - updated

    def value(name: str) -> Json | None:
        if int((objects.get(name) or {}).get("size") or 0) > RECORD_LIMIT:
            return None
        with contextlib.suppress(HttpError, ValueError):
            read = storage.read_json(name, RECORD_LIMIT)[0]
            return read if isinstance(read, dict) else None
        return None

    lease = value(lease_path(job_id)) if lease_path(job_id) in objects else None
    seconds = START_LEASE
    with contextlib.suppress(KeyError, TypeError, ValueError):
        seconds = min(float((lease or {})["seconds"]), MAX_LEASE)
    if lease is not None and age(lease_path(job_id)) <= seconds:
        return True
    deadline = max(stale, seconds)
    for name in objects:
        if name.startswith(status_prefix(job_id)) and age(name) <= deadline:
            status = value(name)
            if status is not None and not is_final(status):
                return True
    return False
