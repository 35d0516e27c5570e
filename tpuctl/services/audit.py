"""gc's audit log: one JSON line per resource gc acted on, appended to a local file.

The line's keys and their order are a format people grep and parse (docs/gc.md); a new
field goes at the end.
"""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tpuctl.config import login_name
from tpuctl.models import Node, QueuedResource


@dataclass(frozen=True, kw_only=True)
class AuditEntry:
    """What gc did to one node or queued resource, and why."""

    project: str
    kind: str  # "node" or QueuedResource.KIND
    name: str
    zone: str
    accelerator: str
    reason: str
    hourly: float | None
    result: str
    evidence: str | None = None  # idleness seen in "metrics" (Cloud Monitoring) or a "probe"

    @classmethod
    def of(
        cls,
        subject: Node | QueuedResource,
        *,
        project: str,
        reason: str,
        hourly: float | None,
        result: str,
        evidence: str | None = None,
    ) -> AuditEntry:
        """The entry for what gc did to one node or queued request."""
        return cls(
            project=project,
            kind="node" if isinstance(subject, Node) else QueuedResource.KIND,
            name=subject.name,
            zone=subject.zone,
            accelerator=subject.accelerator_type,
            reason=reason,
            hourly=hourly,
            result=result,
            evidence=evidence,
        )

    def to_json(self, *, at: float, user: str, host: str) -> dict[str, Any]:
        return {
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at)),
            "user": user,
            "host": host,
            "project": self.project,
            "kind": self.kind,
            "zone": self.zone,
            "node": self.name,
            "accelerator": self.accelerator,
            "reason": self.reason,
            "hourly_usd": self.hourly,
            "result": self.result,
            "evidence": self.evidence,
        }


def append(path: Path, entry: AuditEntry) -> None:
    """Append one entry to the audit log (created with its folder), stamped now, here."""
    path.parent.mkdir(parents=True, exist_ok=True)
    line = entry.to_json(at=time.time(), user=login_name() or "unknown", host=socket.gethostname())
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")
