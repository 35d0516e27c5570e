"""How a request for TPUs waits: the options of a queued or flex-start request, checked
as the APIs check them before any call. Below services and adapters alike: the Cloud TPU
API takes them as a queued resource, Compute Engine as a flex-start VM's own wait.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from tpuctl.errors import UsageError
from tpuctl.models import CreateSpec, QueueSpec

DEFAULT_TIMEOUT = 24 * 3600.0
# The slices one multislice request may ask for. The Cloud TPU API documents no ceiling on
# `multisliceParams.nodeCount` beyond "needs to be > 1" (MultisliceParams, google/cloud/tpu/
# v2/cloud_tpu.proto), nor Compute Engine on a multislice's groups: quota is what bounds
# them. Google's largest published multislice job ran on over 50,000 v5e chips, about 200
# slices of 256 ("the world's largest distributed LLM training job on TPU v5e", Google Cloud
# blog, 2023-11-08); beyond this many, a count is a typo, refused before any call.
MAX_SLICES = 1024


def check_slices(slices: int) -> None:
    """Refuse, naming --slices, a count of slices outside 1 to MAX_SLICES."""
    if slices < 1:
        raise UsageError(f"--slices must be 1 or more, not {slices}")
    if slices > MAX_SLICES:
        raise UsageError(
            f"--slices must be at most {MAX_SLICES} (slices in one multislice request), "
            f"not {slices}"
        )


@dataclass
class QueueOptions:
    valid_until: int | None = None  # seconds the request may wait before it FAILS
    valid_until_time: str | None = None  # or an absolute time (ISO 8601)
    keep_request: bool = False  # on Ctrl-C or timeout, leave the request queued
    timeout: float = DEFAULT_TIMEOUT  # how long tpuctl waits for the node
    slices: int = 1  # > 1: a multislice request for that many nodes (slices)
    flex_start: bool = False  # flex-start capacity, for `max_run_duration` seconds
    max_run_duration: int | None = None


def rfc3339(value: str) -> str:
    """An ISO 8601 time (naive: UTC) -> RFC 3339 in UTC, as the API takes it."""
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"invalid --valid-until-time {value!r}", hint="e.g. 2026-12-01T18:00:00Z"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def queue_spec(spec: CreateSpec, options: QueueOptions) -> QueueSpec:
    """How the request for `spec` waits, checked as the API would check it."""
    if spec.preemptible:
        raise UsageError(
            "queued resources take --spot, not --preemptible", hint="use --queued --spot"
        )
    if options.valid_until and options.valid_until_time:
        raise UsageError("--valid-until and --valid-until-time are exclusive: choose one")
    until_time = rfc3339(options.valid_until_time) if options.valid_until_time else None
    if options.flex_start:
        _check_flex(spec, options)
    return QueueSpec(
        options.slices,
        options.valid_until,
        until_time,
        options.flex_start,
        options.max_run_duration,
    )


# "Flex-start resources can be requested for a maximum of 7 days"
# (cloud.google.com/tpu/docs/request-using-flex-start)
MAX_RUN_DURATION = 7 * 24 * 3600


def _check_flex(spec: CreateSpec, options: QueueOptions) -> None:
    """Flex-start is a provisioning model of its own: not spot capacity nor a
    reservation's, and it needs the time its TPUs run (up to 7 days)."""
    if spec.spot or spec.reserved:
        flag = "--spot" if spec.spot else "--reserved"
        raise UsageError(f"--flex-start and {flag} are exclusive: choose one provisioning model")
    if not options.max_run_duration:
        raise UsageError(
            "--flex-start needs --max-run-duration: how long its TPUs run before they are "
            "deleted (e.g. 4h, at most 7d)"
        )
    if options.max_run_duration > MAX_RUN_DURATION:
        raise UsageError(
            f"--max-run-duration must be at most 7d (604800s) for flex-start, "
            f"not {options.max_run_duration}s"
        )
