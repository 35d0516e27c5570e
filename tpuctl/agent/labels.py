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
