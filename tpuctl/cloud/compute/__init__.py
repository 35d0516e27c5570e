"""TPU VMs on Compute Engine (compute.googleapis.com, v1), through REST with google-auth:
`api.ComputeTpuApi`, the adapter (an instance per host; a multi-host slice as a workload
policy, an instance template and a managed instance group, `slices.py`); `wire.py`, its
bodies and answers; `leftovers.py`, what unfinished creates leave; `quotas.py` and
`quota.py`, its quota pool; `flex.py`, its flex-start rules; `project.py`, the project's
metadata (OS Login).

This module loads no client library: it is the registry's entry (`cloud/registry.py`).
"""

from __future__ import annotations

from typing import Any

from tpuctl.catalog.shapes import SliceShape
from tpuctl.cloud.backend import BackendKind
from tpuctl.google_apis import COMPUTE, COMPUTE_CALLER_PERMISSIONS


def _type_name(shape: SliceShape) -> str | None:
    # Compute Engine names a slice by tpuctl's name (`tpu7x-16`); a host by its machine
    # type, which only the shapes it offers have
    return shape.name if shape.machine_type else None


def _build(factory: Any) -> Any:
    return factory.compute_tpu()


KIND = BackendKind(
    key="compute",
    title="Compute Engine",
    called="Compute Engine",
    service=COMPUTE,
    type_name=_type_name,
    build=_build,
    ends_at_expiry=True,  # an instance's maxRunDuration (wire.py) deletes it at its expiry
    permissions=COMPUTE_CALLER_PERMISSIONS,
    multislice="multislice",  # N slices made as one, with no queued resource (multislice.py)
    metrics_resource="gce_instance",
)
