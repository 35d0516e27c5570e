"""`gc --envs-unused AGE`: the cached environments (gs://BUCKET/tpuctl/envs/<key>/) that no
job used for AGE. An entry's last use is the newest write, by Cloud Storage's clock, of
its index (the build), its `used.json` (worker 0 of every job that used it) or its lock
(a build under way). An entry goes index first: a job that reads it meanwhile finds no
index and builds it again, never a half-deleted one (docs/environments.md)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tpuctl.agent import envkeys

if TYPE_CHECKING:
    from tpuctl.cloud.storage import Bucket, ObjectInfo

_MARKS = ("index.json", "used.json", "lock.json")


@dataclass
class Entry:
    key: str
    last_used: float  # unix seconds
    objects: list[ObjectInfo] = field(default_factory=list)

    @property
    def size(self) -> int:
        return sum(o.size for o in self.objects)


def plan(bucket: Bucket, unused_for: float, now: float | None = None) -> list[Entry]:
    """The entries unused for `unused_for` seconds, oldest first."""
    now = time.time() if now is None else now
    entries: dict[str, Entry] = {}
    for info in bucket.objects(envkeys.ENVS):
        key = info.name[len(envkeys.ENVS) :].partition("/")[0]
        entries.setdefault(key, Entry(key, 0.0)).objects.append(info)
    for entry in entries.values():
        marks = [o.updated for o in entry.objects if o.name.rsplit("/", 1)[-1] in _MARKS]
        # an entry of wheels alone (its builder died) goes by its newest wheel
        entry.last_used = max(marks or [o.updated for o in entry.objects])
    unused = [e for e in entries.values() if now - e.last_used >= unused_for]
    return sorted(unused, key=lambda e: e.last_used)


def prune(bucket: Bucket, entry: Entry) -> None:
    """Delete one entry, its index first."""
    from tpuctl.errors import NotFoundError

    first = sorted(entry.objects, key=lambda o: not o.name.endswith("/index.json"))
    for info in first:
        try:
            bucket.delete(info.name)
        except NotFoundError:
            continue
