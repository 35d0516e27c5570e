"""Flex-start on Compute Engine: a VM (or a slice's VMs) that waits for capacity by
itself, with no queued resource, then runs its `maxRunDuration` and is deleted.

The flags mean what they mean on the Cloud TPU API (`--flex-start --max-run-duration
4h`, `--valid-until` for how long to wait, `--timeout`, `--keep-request`). A single VM's
wait is the insert's own `params.requestValidForDuration`: 90 s to 2 h, and 2 h when
not given (Google's announcement of flex-start VMs: requests "persist in a queue for up
to two hours"; a field report saw gcloud refuse values outside 90 s to 2 h). A slice's
managed instance group waits in bulk mode until every VM can be made, with no deadline
of its own: tpuctl's wait bounds it (`--valid-until`, else `--timeout`), and a wait that
ends at `--valid-until` ends for no capacity, as a single VM's does, so that the next
zone is tried (services/queued.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tpuctl.errors import UsageError
from tpuctl.queueing import queue_spec

if TYPE_CHECKING:
    from tpuctl.models import CreateSpec
    from tpuctl.queueing import QueueOptions

MIN_WAIT, MAX_WAIT = 90, 7200  # requestValidForDuration, seconds


def check(spec: CreateSpec, options: QueueOptions) -> None:
    """Check a Compute Engine flex-start create before any call, and put its flex-start
    settings on the spec."""
    queue_spec(spec, options)  # the same rules as on the Cloud TPU API
    if spec.reservation:
        raise UsageError(
            "--flex-start and --reservation are exclusive: choose one provisioning model"
        )
    if options.valid_until_time:
        raise UsageError(
            "--valid-until-time: a flex-start VM on Compute Engine waits a duration",
            hint=f"use --valid-until ({MIN_WAIT}s to 2h)",
        )
    wait = options.valid_until
    if wait is not None and not spec.shape.multi_host and not MIN_WAIT <= wait <= MAX_WAIT:
        raise UsageError(
            f"--valid-until must be from {MIN_WAIT}s to 2h for a flex-start VM on Compute "
            f"Engine, not {wait}s"
        )
    spec.flex_start = True
    spec.max_run_duration = options.max_run_duration
    spec.request_valid_for = None if spec.shape.multi_host else wait or MAX_WAIT
    spec.capacity_wait = wait if spec.shape.multi_host else None
