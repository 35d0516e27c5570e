"""The checks of a worker's TPU that the agent runs before the job (tpu_preflight.py)
and again once the script failed (tpu_health.py): its device files, and what its node
says of it. tpu_preflight.py says what each is and why.

Standard library only, Python 3.8+.
"""

from __future__ import annotations

import glob
import os
from typing import Any

from .metadata import attribute
from .net import HttpError

ACCEL_GENERATIONS = ("v2", "v3", "v4")  # /dev/accel*; later ones: /dev/vfio/*
ACCEL, VFIO = "/dev/accel*", "/dev/vfio/*"


def accelerator_type() -> str:
    """This VM's accelerator type (`v4-8`, `v5litepod-4`, `v7x-8`), "" when unknown."""
    try:
        found = attribute("accelerator-type")
    except (HttpError, OSError):
        found = ""
    return (found or os.environ.get("TPU_ACCELERATOR_TYPE", "")).strip()


def expected(accelerator: str) -> tuple[str, ...]:
    """The globs of the device files of a VM of that type (either, when unknown)."""
    generation = accelerator.rsplit("-", 1)[0].lower()
    if not generation:
        return (ACCEL, VFIO)
    return (ACCEL,) if generation in ACCEL_GENERATIONS else (VFIO,)


def _chips(pattern: str) -> list[str]:
    """The device files a glob finds: /dev/vfio's numbered groups (not its container)."""
    found = glob.glob(pattern)
    if pattern == VFIO:
        found = [p for p in found if os.path.basename(p).isdigit()]
    return sorted(found)


def device_problem(worker: int, accelerator: str) -> str | None:
    """What is wrong with this worker's TPU device files, or None."""
    patterns = expected(accelerator)
    if any(_chips(p) for p in patterns):
        return None
    named = [p.strip() for p in os.environ.get("TPUCTL_TPU_DEVICES", "").split(",") if p.strip()]
    if named and all(os.path.exists(p) for p in named):
        return None
    return f"no TPU device files ({' or '.join(patterns)}) on worker {worker}"


def node_problem(job: Any) -> str | None:
    """What the job's node says of this worker's TPU (its `health` and `symptoms` on the
    TPU API, tpu_api.py; a target without them, as a Compute Engine VM, says nothing),
    or None; None too when the node cannot be read now (the other checks still hold)."""
    health = getattr(job.node, "health", None)
    if health is None:
        return None
    try:
        return health(job.worker)
    except (HttpError, OSError, ValueError):
        return None


def problem_now(job: Any, accelerator: str | None = None) -> str | None:
    """What is wrong with this worker's TPU now: its device files, then what its node
    says; None when nothing is."""
    accelerator = accelerator_type() if accelerator is None else accelerator
    return device_problem(job.worker, accelerator) or node_problem(job)
