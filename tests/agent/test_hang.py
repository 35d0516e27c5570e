"""The agent's hang check (agent/hang.py) with its clock and the chips' evidence given:
said once after --hang-after of silence with idle chips, never while the chips work,
taken back when the job prints again."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tpuctl.agent import hang, protocol


class FakeStatus:
    def __init__(self) -> None:
        self.value: dict[str, Any] = {"state": protocol.RUNNING, "phase": "script", "child_pid": 7}
        self.writes: list[dict[str, Any]] = []

    def write(self, **changes: Any) -> None:
        self.value.update(changes)
        self.writes.append(changes)


class FakeJob:
    def __init__(self, tmp_path: Path) -> None:
        self.local_log = tmp_path / "attempt-1.log"
        self.local_log.write_text("started\n")
        self.status = FakeStatus()
        self.args = SimpleNamespace(job_id="20261205-000000-abcdef")
        self.said: list[str] = []

    def say(self, text: str) -> None:
        self.said.append(text)
        with self.local_log.open("a") as f:
            f.write(f"tpuctl-agent: {text}\n")

    def quietly(self, fn: Any) -> None:
        fn()


def test_silence_with_no_chip_evidence_is_a_hang_said_once(tmp_path: Path) -> None:
    job = FakeJob(tmp_path)
    watch = hang.Watch(job, 60.0, lambda now: None, cpu=lambda group: 0.0)
    assert not watch.tick(now=1000.0)  # the first look: the silence starts
    assert not watch.tick(now=1059.0)
    assert watch.tick(now=1061.0)
    assert watch.tick(now=1200.0)  # still hung; its own line in the log is no output
    none = "no TensorCore data (neither libtpu nor Cloud Monitoring)"
    assert len(job.said) == 1 and f"no output or CPU work for 61s and {none}" in job.said[0]
    assert "`tpuctl stacks 20261205-000000-abcdef`" in job.said[0]
    assert job.status.writes == [
        {
            "hung_since": round(watch.since_wall, 3),
            "hung_chips": none,
        }
    ]


def test_busy_chips_are_no_hang_and_idle_ones_are(tmp_path: Path) -> None:
    job = FakeJob(tmp_path)
    idle = {"for": 5.0}
    watch = hang.Watch(job, 60.0, lambda now: idle["for"], cpu=lambda group: 0.0)
    watch.tick(now=0.0)
    assert not watch.tick(now=300.0)  # quiet, but the TensorCores worked 5 s ago
    idle["for"] = 400.0
    assert watch.tick(now=301.0)
    assert job.status.value["hung_chips"] == "TensorCores idle 6m (Cloud Monitoring)"


class Clock:
    """The wall clock of the watch and of the chips' readings, moved by the test."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def read_chips(job: FakeJob, clock: Clock, *duties: float) -> None:
    """A look of the chips (chips.py) now, as it leaves them in the status."""
    job.status.value["chips"] = {
        "source": "libtpu",
        "address": "localhost:8431",
        "at": clock.now,
        "chips": [
            {"chip": k, "hbm_used": 1 << 30, "hbm_total": 32 << 30, "duty_cycle": d}
            for k, d in enumerate(duties)
        ],
    }


def test_busy_chips_are_no_hang_even_without_a_monitoring_point(tmp_path: Path) -> None:
    job, clock = FakeJob(tmp_path), Clock()
    asked: list[float] = []
    watch = hang.Watch(job, 60.0, lambda now: asked.append(now), cpu=lambda g: 0.0, wall=clock)
    for t in range(0, 601, 5):  # 10 minutes quiet, one chip of four working throughout
        clock.now += 5
        read_chips(job, clock, 0.0, 97.5, 0.0, 0.0)
        assert not watch.tick(now=float(t))
    assert not job.said and "hung_since" not in job.status.value
    assert asked == []  # the live figures decided: Monitoring was not asked


def test_chips_at_zero_duty_for_the_quiet_period_are_a_hang_said_with_the_source(
    tmp_path: Path,
) -> None:
    job, clock = FakeJob(tmp_path), Clock()
    asked: list[float] = []

    def monitoring(now: float) -> float:  # says the chips worked 1 s ago: not asked
        asked.append(now)
        return 1.0

    watch = hang.Watch(job, 60.0, monitoring, cpu=lambda g: 0.0, wall=clock)
    read_chips(job, clock, 80.0, 80.0)
    assert not watch.tick(now=0.0)
    for t in (10, 20, 30, 40, 50):  # the step is done at 10 s: every chip idle
        clock.now += 10
        read_chips(job, clock, 0.0, 0.5)
        assert not watch.tick(now=float(t))  # quiet since the chips' last work, at 0 s
    clock.now += 15
    read_chips(job, clock, 0.0, 0.0)
    assert watch.tick(now=65.0)
    evidence = "chips idle 65s (duty cycle <= 1%, libtpu)"
    assert job.status.value["hung_chips"] == evidence and asked == []
    assert f"no output or CPU work for 65s and {evidence}: the script may be hung" in job.said[0]
    read_chips(job, clock, 0.0, 55.0)  # a chip works again: the hang is taken back
    assert not watch.tick(now=80.0)
    assert job.status.value["hung_since"] is None and job.status.value["hung_chips"] is None


def test_a_stale_or_failed_reading_of_the_chips_falls_back_to_monitoring(
    tmp_path: Path,
) -> None:
    job, clock = FakeJob(tmp_path), Clock()
    watch = hang.Watch(job, 60.0, lambda now: 400.0, cpu=lambda g: 0.0, wall=clock)
    read_chips(job, clock, 100.0)  # busy, but read long before the look
    clock.now += hang.LIVE_STALE + 1
    watch.tick(now=0.0)
    assert watch.tick(now=61.0)
    assert job.status.value["hung_chips"] == "TensorCores idle 6m (Cloud Monitoring)"

    job, clock = FakeJob(tmp_path), Clock()
    watch = hang.Watch(job, 60.0, lambda now: 5.0, cpu=lambda g: 0.0, wall=clock)
    job.status.value["chips"] = {"source": "libtpu", "at": clock.now, "error": "UNAVAILABLE"}
    watch.tick(now=0.0)
    assert not watch.tick(now=61.0)  # Monitoring: the TensorCores worked 5 s ago


def test_a_silent_job_working_the_cpu_is_no_hang(tmp_path: Path) -> None:
    """A compile prints nothing and leaves the chips idle for minutes, on a busy CPU."""
    job = FakeJob(tmp_path)
    used = {"s": 0.0}
    watch = hang.Watch(job, 60.0, lambda now: None, cpu=lambda group: used["s"])
    for now in range(0, 300, 10):
        used["s"] += 9.0  # 90% of a core
        assert not watch.tick(now=float(now))
    for now in range(300, 341, 10):  # the compile is done; nothing more happens
        assert not watch.tick(now=float(now))
    assert watch.tick(now=351.0)  # quiet since the CPU's last work, at 290 s
    assert "no output or CPU work for 61s" in job.said[0]


def test_output_again_takes_the_hang_back(tmp_path: Path) -> None:
    job = FakeJob(tmp_path)
    watch = hang.Watch(job, 10.0, lambda now: None, cpu=lambda group: 0.0)
    watch.tick(now=0.0)
    assert watch.tick(now=11.0)
    with job.local_log.open("a") as f:
        f.write("step 2\n")
    assert not watch.tick(now=12.0)
    assert job.status.value["hung_since"] is None and job.status.value["hung_chips"] is None
    assert not watch.tick(now=21.0)  # the silence counts from the new output
    assert watch.tick(now=23.0)
    assert len(job.said) == 2


def test_no_hang_outside_the_setup_and_the_script(tmp_path: Path) -> None:
    job = FakeJob(tmp_path)
    job.status.value.update(state=protocol.FETCHING, phase=None)
    watch = hang.Watch(job, 10.0, lambda now: None, cpu=lambda group: 0.0)
    watch.tick(now=0.0)
    assert not watch.tick(now=100.0) and not job.said


def test_zero_turns_the_watch_off(tmp_path: Path) -> None:
    job = FakeJob(tmp_path)
    watch = hang.Watch(job, 0.0, lambda now: None, cpu=lambda group: 0.0)
    done = threading.Event()
    thread = threading.Thread(target=lambda: (watch.watch(threading.Event()), done.set()))
    thread.start()
    thread.join(timeout=10)
    assert done.is_set() and not job.said  # it returned at once, without a stop


def test_the_cpu_of_a_process_group_is_read_from_proc() -> None:
    import subprocess
    import sys
    import time

    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
    idle = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while hang.group_cpu(busy.pid) < 0.2:  # a spinning process: its CPU time grows
            assert time.monotonic() < deadline, "the busy process used no CPU"
            time.sleep(0.05)
        assert hang.group_cpu(idle.pid) < 0.1
        assert hang.group_cpu(2**22 + 7) == 0.0  # no such group
    finally:
        for p in (busy, idle):
            p.kill()
            p.wait()
