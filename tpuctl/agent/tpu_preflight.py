"""Before anything of the job runs on a worker: is the TPU there, and free?

Standard library only, Python 3.8+. `agent run|start` calls `ready` before the job
(agent.py, `serve`). It looks at
(their checks, also run after the script failed, are tpu_checks.py's)
- the TPU's device files. A TPU VM shows its chips as /dev/accel0, /dev/accel1, ... on
  v2, v3 and v4, and as VFIO groups /dev/vfio/0, /dev/vfio/1, ... from v5e on: the files
  libtpu opens, and those Ray's TPU accelerator manager counts
  (github.com/ray-project/ray, python/ray/_private/accelerators/tpu.py). Which kind, the
  VM's accelerator type says (the metadata server's `instance/attributes/
  accelerator-type`, else TPU_ACCELERATOR_TYPE); where TPUCTL_TPU_DEVICES
  (comma-separated) names them elsewhere, as for the idle check (idle.py), those count
  too. None there is a problem: users meet it after a stop/start that did not bring
  the chips back (github.com/jax-ml/jax/issues/13260), and their fix is a new VM;
- what the node says of its TPU, where its API says it (a TPU API node's `health`
  UNHEALTHY_* and its TPU `symptoms[]`, read with the VM's service account:
  tpu_api.unwell; a Compute Engine instance has no such field, compute_api.py);
- libtpu's lock, /tmp/libtpu_lockfile (checkup.py): one that no live process holds (no
  process has it or a TPU device open) is what a killed libtpu process leaves, and the
  next one refuses the TPU ("TPU in use", github.com/jax-ml/jax/issues/10192). It is
  removed, as a person would, and the job's log says so: a fix, not a problem.
A problem ends the attempt before anything of the job runs (no code fetched, no setup,
no script): its status FAILED with no exit status, `"reason": "tpu_unhealthy"` and
`"evidence"` the problem; the node is torn down as after a preemption and the runner
makes a new one (`tpuctl run --repairs`).
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from . import checkup, protocol
from .tpu_checks import problem_now

if TYPE_CHECKING:
    from .job import Job

REASON = "tpu_unhealthy"  # the status's "reason" (tpu_health.py's too)


def remove_stale_lock() -> str | None:
    """Remove libtpu's lock when no live process holds it; what was done, or None."""
    if not checkup.lockfile(checkup.holders()).get("stale"):
        return None
    try:
        os.remove(checkup.LOCKFILE)
    except OSError as e:
        return f"could not remove a stale libtpu lock ({checkup.LOCKFILE}): {e}"
    return f"removed a stale libtpu lock left by no live process ({checkup.LOCKFILE})"


def ready(job: Job) -> bool:
    """Check this worker's TPU before the job; on a problem, end the attempt (its final
    status, the log) and return False."""
    from .job import private_dir

    private_dir(job.dir)
    problem = problem_now(job)
    if problem is None:
        fixed = remove_stale_lock()
        if fixed:
            job.say(fixed)
        return True
    job.say(f"error: {problem}: the job is not started; the runner replaces the node")
    job.status.value.update(reason=REASON, evidence=problem, message=problem)
    job.quietly(
        lambda: job.status.write(state=protocol.FAILED, exit_status=None, ended=time.time())
    )
    job.quietly(lambda: job.log.upload(force=True))
    return False
