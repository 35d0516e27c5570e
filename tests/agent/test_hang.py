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
    assert (
        len(job.said) == 1 and "no output or CPU work for 61s and no TensorCore data" in job.said[0]
    )
    assert "`tpuctl stacks 20261205-000000-abcdef`" in job.said[0]
    assert job.status.writes == [
        {"hung_since": round(watch.since_wall, 3), "hung_chips": "no TensorCore data"}
    ]


def test_busy_chips_are_no_hang_and_idle_ones_are(tmp_path: Path) -> None:
    job = FakeJob(tmp_path)
    idle = {"for": 5.0}
    watch = hang.Watch(job, 60.0, lambda now: idle["for"], cpu=lambda group: 0.0)
    watch.tick(now=0.0)
    assert not watch.tick(now=300.0)  # quiet, but the TensorCores worked 5 s ago
    idle["for"] = 400.0
    assert watch.tick(now=301.0)
    assert job.status.value["hung_chips"] == "TensorCores idle 6m"


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
