"""A job's node down for a host maintenance: waited for, not blamed on the script.

A TPU VM cannot live-migrate, so the host's maintenance stops it: its guest gets the
notice (the agents end the attempt as on a preemption's, agent/maintenance.py), then the
node is down for the maintenance's window (the TPU API shows it REPAIRING, Compute
Engine's VM TERMINATED) and comes back on its own when it is neither spot nor
preemptible ("Manage maintenance events", https://cloud.google.com/tpu/docs/maintenance-events;
"Host maintenance overview",
https://cloud.google.com/compute/docs/instances/host-maintenance-overview). The runner
waits for it: first for the node to go down (at most DOWN_WAIT after the notice, the
soft-off Compute Engine gives a standard VM), then for it to be READY again (at most
BACK_WAIT); a node that does not come back in time, or that ends PREEMPTED or gone, is
made again as after a preemption. A spot node does not come back, so its maintenance
takes the preemption's path (and its --restarts).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from tpuctl.errors import NotFoundError, TpuctlError
from tpuctl.models import NODE_CREATE_FAILED
from tpuctl.services.run import provision, watch
from tpuctl.services.run.spec import Job
from tpuctl.waiting import poll_until

DOWN_WAIT = 150.0  # from the notice until the VM is stopped (120 s soft off, and a margin)
BACK_WAIT = 3600.0  # from then until the node is READY again, else it is made again


def comes_back(job: Job) -> bool:
    """Can the job's node come back by itself after a maintenance? Not a spot or
    preemptible one (stopped for good), nor a multislice job's (made again whole)."""
    node = job.spec.node_spec
    return not (node.spot or node.preemptible or job.multislice)


def wait_back(job: Job) -> bool:
    """Wait for the node to go down for the maintenance and come back READY; False when
    it did not (gone, failed, or not READY within BACK_WAIT): then it is made again."""
    backend, name = job.adapters.backend, job.full_name
    since, down = time.monotonic(), False

    def check() -> tuple[bool | None, str]:
        nonlocal down
        try:
            state = backend.get_node(name).state
        except NotFoundError:
            return False, "DELETED"
        if state in NODE_CREATE_FAILED - {"TERMINATED"}:  # PREEMPTED, deleting: not back
            return False, state
        if state != "READY":
            down = True
            return None, state
        if down or time.monotonic() - since > DOWN_WAIT:  # back (or never went down)
            return True, state
        return None, "READY (the maintenance has not stopped it yet)"

    with job.ui.progress(f"waiting for {job.what} to come back from its maintenance:") as update:
        try:
            return bool(
                poll_until(check, what=name, progress=update, timeout=DOWN_WAIT + BACK_WAIT)
            )
        except TpuctlError as e:
            job.ui.info(f"{job.what} did not come back from its maintenance: {e}")
            return False


def resume(job: Job, state: str, next_attempt: Callable[[], None]) -> None:
    """The node went down for a host maintenance: wait for it to come back (or make it
    again), then the next attempt; not one of --restarts (the cloud's doing)."""
    job.ui.info(
        f"{job.what} is down for host maintenance ({state}) during attempt "
        f"{job.attempt}; waiting for it to come back, then resuming the job"
    )
    job.agents_started = False  # until they start on the node back
    since = time.time()
    if not wait_back(job):
        job.ui.info(f"recreating {job.what} (it did not come back from its maintenance)")
        provision.recreate(job)
    next_attempt()
    job.recovery += time.time() - since
    job.restarts_for[watch.MAINTENANCE] = job.restarts_for.get(watch.MAINTENANCE, 0) + 1
