"""The labels tpuctl writes on nodes and queued resources (docs: DESIGN's label table).

The one definition of their names: tpuctl.models takes them from here, and the idle
watchdog on the VM reads them from the TPU API (`number` reads a label's number).
Standard library only, Python 3.8+: this module travels in the agent bundle.
"""

from __future__ import annotations

from typing import Any

MANAGED_BY = "managed-by"
MANAGED_BY_VALUE = "tpuctl"
OWNER = "tpuctl-owner"
CREATED = "tpuctl-created"
EXPIRES = "tpuctl-expires"
IDLE_TIMEOUT = "tpuctl-idle-timeout"
LAST_ACTIVE = "tpuctl-last-active"
JOB = "tpuctl-job"
KEEP = "tpuctl-keep"
START_DEADLINE = "tpuctl-start-deadline"
# From --max-cost: the cap in US cents, and the moment the node has cost it at its price
# (`tpuctl-expires` is the earlier of that and the --ttl's end).
MAX_COST = "tpuctl-max-cost"
COST_DEADLINE = "tpuctl-cost-deadline"
# Kept by `tpuctl stop` and `start`, so that a stopped node's cost so far stays flat: the
# seconds it ran before its last stop, and the unix time of its last start.
RAN = "tpuctl-ran"
STARTED = "tpuctl-started"

# Node metadata (instance/attributes/...) that `tpuctl run` sets on a node it creates,
# for the boot guard (guard.py): the job's bucket and the attempt the node was made for.
BUCKET_ATTRIBUTE = "tpuctl-bucket"
ATTEMPT_ATTRIBUTE = "tpuctl-attempt"


def number(value: Any) -> float | None:
    """A label's number, or None."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def expiry(labels: Any) -> tuple[float | None, str]:
    """When the node goes by its labels (`tpuctl-expires`, the earlier of the --ttl's end
    and the --max-cost deadline), and why, said for a person: `its max cost ($50.00 at
    list price, after 6h15m)`, or `its TTL (--ttl)`. (None, "") when it has no expiry."""
    labels = labels or {}
    expires = number(labels.get(EXPIRES))
    if expires is None:
        return None, ""
    cents, deadline = number(labels.get(MAX_COST)), number(labels.get(COST_DEADLINE))
    if cents is None or deadline is None or abs(deadline - expires) > 1:
        return expires, "its TTL (--ttl)"
    created = number(labels.get(CREATED))
    after = "" if created is None else f", after {_span(deadline - created)}"
    return expires, f"its max cost (${cents / 100:,.2f} at list price{after})"


def _span(seconds: float) -> str:
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"
