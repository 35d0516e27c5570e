"""Is the job hung on this worker? A job is taken to hang when its setup or script has
printed nothing, used next to no CPU (its process group: under BUSY_CPU of a core between
two looks) and its chips did no work for --hang-after seconds. The chips' evidence comes
first from their own figures, live: the duty cycle libtpu serves on the VM, as the chips'
looks (chips.py) last put it in the status. A fresh reading with a chip above IDLE_DUTY
is work, like output (the silence starts again); a fresh reading with every chip at most
IDLE_DUTY, when the silence has lasted --hang-after, is the evidence that they idled
(no look of the quiet period saw them work). Only where that source has no fresh reading
is Cloud Monitoring asked: its `tpu/tensorcore/idle_duration` of this worker
(monitoring.py, as the idle watchdog reads it) at least as long as the silence, or no
fresh point (no evidence of work), counts as idle. A stuck collective or a lock leaves
all three quiet; a silent compile works the CPU, a long step the chips: no hang. It is
said once in the job's log and in the status (`hung_since`: the wall time since which it
has been quiet; `hung_chips`: what the chips' evidence was and its source), and taken
back when the job prints or works again. Nothing is stopped: `tpuctl stacks JOB` shows
where the threads wait.

Standard library only, Python 3.8+, like every module of the agent (bundle.py).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable

from . import protocol
from .chips import EVERY as CHIPS_EVERY
from .chips import SOURCE as LIVE
from .processes import in_group

PHASES = ("setup", "script")
MOST_EVERY = 30.0  # the longest time between two looks at the log
BUSY_CPU = 0.1  # cores the job's processes use on average between two looks: it works
IDLE_DUTY = 1.0  # percent: a chip whose duty cycle is at most this did no work
LIVE_STALE = max(15.0, 3 * CHIPS_EVERY)  # seconds: an older reading of the chips is none
MONITORING = "Cloud Monitoring"


def group_cpu(group: int) -> float:
    """CPU seconds the processes of process group `group` have used (user + system)."""
    ticks = os.sysconf("SC_CLK_TCK")
    return sum(int(f[11]) + int(f[12]) for f in in_group(group).values()) / ticks


def live_duty(reading: Any, wall: float) -> float | None:
    """The highest duty cycle (percent) of this worker's chips in their newest reading
    (chips.py: the status's `chips`), or None when there is none, or it is older than
    LIVE_STALE, or says no duty cycle."""
    if not isinstance(reading, dict) or reading.get("error"):
        return None
    at = reading.get("at")
    if isinstance(at, bool) or not isinstance(at, (int, float)) or wall - at > LIVE_STALE:
        return None
    duties = [c.get("duty_cycle") for c in reading.get("chips") or [] if isinstance(c, dict)]
    found = [float(d) for d in duties if isinstance(d, (int, float)) and not isinstance(d, bool)]
    return max(found) if found else None


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
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.job, self.after, self.chips, self.cpu, self.wall = job, after, chips, cpu, wall
        self.used: tuple[float, float] | None = None  # (when, CPU seconds) at the last look
        self.every = min(MOST_EVERY, max(after / 4, 0.05))
        self.size, self.child = -1, None
        self.since, self.since_wall = time.monotonic(), wall()
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
        duty = live_duty(status.get("chips"), self.wall())
        busy_chips = duty is not None and duty > IDLE_DUTY
        size, child, working = self._log_size(), status.get("child_pid"), self._working(now)
        if not running or size != self.size or child != self.child or working or busy_chips:
            self.size, self.child = size, child
            self.since, self.since_wall = now, self.wall()
            if self.hung:
                self.hung = False
                self.job.status.write(hung_since=None, hung_chips=None)
            return False
        silent = now - self.since
        if self.hung or silent < self.after:
            return self.hung
        if duty is not None:  # fresh, and no look of the quiet period saw a chip work
            chips = f"chips idle {quiet(silent)} (duty cycle <= {IDLE_DUTY:g}%, {LIVE})"
        else:
            idle = self.chips(self.wall())
            if idle is not None and idle < silent:
                return False  # the chips worked meanwhile: busy, if quiet
            chips = (
                f"no TensorCore data (neither {LIVE} nor {MONITORING})"
                if idle is None
                else f"TensorCores idle {quiet(idle)} ({MONITORING})"
            )
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
