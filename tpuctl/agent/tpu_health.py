"""A TPU that will not come up, read from a script's early failure.

When the TPU runtime cannot start, the framework ends the program before its first
step, and the users' fix is to replace the VM, not to change their script: reports of
`TPU initialization failed: ...` (JAX's and PyTorch/XLA's words for libtpu's failure to
start), of `Failed to get TPU metadata` and of `libtpu.so already in use by another
process` with no live holder, on github.com/jax-ml/jax/issues/10192, /13260 and /21761
and github.com/pytorch/xla/issues/7227.

A TPU can also go mid-run, after the job wrote checkpoints: its chips vanish, its
runtime halts, its node turns UNHEALTHY_*.

`script` runs the job's script (Job.supervise); once the script failed, `judge` runs
the TPU's checks again (tpu_checks.py: its device files, what its node says of it)
and reads the attempt's log (the script's stdout and stderr, as the agent keeps them):
its last `TAIL` bytes when the script failed early (it ran less than `EARLY` seconds
and wrote nothing into TPUCTL_OUTPUT_DIR: no checkpoint, no progress of this attempt),
else its last `LAST_LINES` lines. A finding is the TPU's failure, not the script's:
the attempt's status ends FAILED with `"reason":
"tpu_unhealthy"` and `"evidence"` what was found (the same two keys
tpu_preflight.py writes), and worker 0 tears the node down as after a preemption: the
runner makes a new one (`tpuctl run --repairs`), and no node is left billing when no
client is there to.

Standard library only, Python 3.8+.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

from . import maintenance, tpu_checks

REASON = "tpu_unhealthy"  # the status's "reason" (also tpu_preflight.py's)
# the reasons of an attempt's end whose node is the runner's, not torn down by the agent:
# a host maintenance's node comes back. A node whose TPU did not come up is torn down as
# after a preemption (the runner makes a new one), so that no client, or a detached job,
# leaves it billing.
LEFT = {
    maintenance.REASON: "host maintenance: the node is left to the runner, which waits for it",
}
TAIL = 64 * 1024  # bytes of the log's end that are read
EARLY = 600.0  # seconds: a script that ran longer got past its TPU's start
LAST_LINES = 40  # a later failure's TPU error: among the log's last lines (its traceback)
PATTERNS = re.compile(
    r"TPU initialization failed"
    r"|Failed to get TPU metadata"
    r"|libtpu\.so already in use by another process",
    re.IGNORECASE,
)


def evidence(log: Path, size: int = TAIL, last: int | None = None) -> str | None:
    """The last line of the log's tail (of its `last` lines, when given) that says the
    TPU did not come up, or None."""
    try:
        with open(str(log), "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - size))
            tail = f.read(size)
    except OSError:
        return None
    found = None
    lines = tail.decode("utf-8", "replace").splitlines()
    for line in lines[-last:] if last else lines:
        if PATTERNS.search(line):
            found = line.strip()
    return found[:500] if found else None


def wrote_since(folder: Path, since: float) -> bool:
    """Has anything in the folder been written since `since` (epoch seconds)?"""
    for root, _, files in os.walk(str(folder)):
        for name in files:
            try:
                if os.stat(os.path.join(root, name)).st_mtime >= since:
                    return True
            except OSError:
                continue
    return False


def judge(job: Any, started: float, code: int) -> str | None:
    """The evidence that the script of `job`, which exited `code`, failed on its TPU, or
    None: the TPU's checks, run again (tpu_checks.problem_now: its device files, its
    node's health), or the log's words: anywhere in its tail when the script failed
    within `EARLY` seconds of `started` (epoch) before writing any output, else in its
    last `LAST_LINES` lines (a TPU lost mid-run, whose error ends the log)."""
    if code == 0:
        return None
    found = tpu_checks.problem_now(job)
    if found is not None:
        return found
    early = time.time() - started <= EARLY and not wrote_since(job.outputs, started)
    return evidence(job.local_log, last=None if early else LAST_LINES)


def mark(status: dict, found: str) -> None:
    """The attempt's status says the TPU failed, with the line that says so."""
    status["reason"] = REASON
    status["evidence"] = found
    status["message"] = f"the TPU did not come up: {found}"[:500]


def script(job: Any, command: list, env: dict) -> int:
    """Run the script of `job` (a job.Job); when it failed early on its TPU, its status
    says so (the runner replaces the node) and the job's log has the agent's line."""
    started = time.time()
    code = job.supervise(command, env, "script")
    found = judge(job, started, code)
    if found is not None and job.noticed_at is None and not job.cancelled:
        mark(job.status.value, found)
        job.say(f"the script failed on its TPU: {found}")
    return code
