"""Is the job hung on this worker? A job is taken to hang when its setup or script has
printed nothing and used next to no CPU (its process group: under BUSY_CPU of a core
between two looks) for --hang-after seconds, while its TensorCores did no work: Cloud
Monitoring's `tpu/tensorcore/idle_duration` of this worker (monitoring.py, as the idle
watchdog reads it) is at least as long, or Monitoring has no fresh point (no evidence of
work). A stuck collective or a lock leaves all three quiet; a silent compile works the
CPU, a long step the chips: no hang. It is said once in the job's log and in the status
(`hung_since`: the wall time since which it has been quiet; `hung_chips`: what the
chips' evidence was), and taken back when the job prints or works again. Nothing is
stopped: `tpuctl stacks JOB` shows where the threads wait.

Standard library only, Python 3.8+, like every module of the agent (bundle.py).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable

from . import protocol
from .processes import in_group

PHASES = ("setup", "script")
MOST_EVERY = 30.0  # the longest time between two looks at the log
BUSY_CPU = 0.1  # cores the job's processes use on average between two looks: it works


def group_cpu(group: int) -> float:
    """CPU seconds the processes of process group `group` have used (user + system)."""
    ticks = os.sysconf("SC_CLK_TCK")
    return sum(int(f[11]) + int(f[12]) for f in in_group(group).values()) / ticks


def quiet(seconds: float) -> str:
    s = int(seconds)
    return f"{s}s" if s < 120 else f"{s // 60}m"


class Watch:
    """The hang check of one attempt (`job`: the Job, for its log, status and node)."""

    def __init__(
        self,
        job: Any,
        after: float,
        chips: Callable[[float], float | None],
        cpu: Callable[[int], float] = group_cpu,
    ) -> None:
        self.job, self.after, self.chips, self.cpu = job, after, chips, cpu
        self.used: tuple[float, float] | None = None  # (when, CPU seconds) at the last look
        self.every = min(MOST_EVERY, max(after / 4, 0.05))
        self.size, self.child = -1, None
        self.since, self.since_wall = time.monotonic(), time.time()
        self.hung = False

    @classmethod
    def of(cls, job: Any) -> Watch:
        """The watch of a Job: its --hang-after, its worker's TensorCores' evidence."""
        chips = job.node.tensorcore_idle
        return cls(
            job, getattr(job.args, "hang_after", 0.0), lambda now: chips(job.me["worker"], now)
        )

    def watch(self, stop: threading.Event) -> None:
        """A thread: look every `every` seconds until `stop` (nothing with --hang-after 0)."""
        if self.after <= 0:
            return
        while not stop.wait(self.every):
            self.job.quietly(self.tick)

    def _log_size(self) -> int:
        try:
            return os.path.getsize(str(self.job.local_log))
        except OSError:
            return -1

    def tick(self, now: float | None = None) -> bool:
        """One look; True when the job is (now) taken to hang."""
        now = time.monotonic() if now is None else now
        status = self.job.status.value
        running = status.get("state") == protocol.RUNNING and status.get("phase") in PHASES
        size, child, working = self._log_size(), status.get("child_pid"), self._working(now)
        if not running or size != self.size or child != self.child or working:
            self.size, self.child = size, child
            self.since, self.since_wall = now, time.time()
            if self.hung:
                self.hung = False
                self.job.status.write(hung_since=None, hung_chips=None)
            return False
        silent = now - self.since
        if self.hung or silent < self.after:
            return self.hung
        idle = self.chips(time.time())
        if idle is not None and idle < silent:
            return False  # the chips worked meanwhile: busy, if quiet
        chips = "no TensorCore data" if idle is None else f"TensorCores idle {quiet(idle)}"
        self.job.say(
            f"no output or CPU work for {quiet(silent)} and {chips}: the {status.get('phase')} may "
            f"be hung; `tpuctl stacks {self.job.args.job_id}` shows where its threads wait"
        )
        self.size = self._log_size()  # that line is no output of the job's
        self.hung = True
        self.job.status.write(hung_since=round(self.since_wall, 3), hung_chips=chips)
        return True

    def _working(self, now: float) -> bool:
        """Did the job's processes use the CPU since the last look (BUSY_CPU)?"""
        child = self.job.status.value.get("child_pid")
        used = self.cpu(child) if isinstance(child, int) else 0.0
        last, self.used = self.used, (now, used)
        if last is None or now <= last[0]:
            return False
        return (used - last[1]) / (now - last[0]) > BUSY_CPU
