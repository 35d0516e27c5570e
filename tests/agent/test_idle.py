"""The bundle's `idle check`: busy means a tpuctl job, an interactive session or a held
TPU device."""

from __future__ import annotations

import json
import os
import pty
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agent.conftest import AGENT_PYTHON, checked, install_bundle, wait_for
from tpuctl.agent import bundle


class Worker:
    """A pretend worker: a device file, and processes marked as its own by their env."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bundle = install_bundle(root)
        self.device = root / "accel0"
        self.device.touch()
        self.scope = f"TPUCTL_TEST_IDLE={secrets.token_hex(4)}"
        self.procs: list[subprocess.Popen[bytes]] = []

    def env(self) -> dict[str, str]:
        name, value = self.scope.split("=")
        return dict(os.environ, TPUCTL_TPU_DEVICES=str(self.device), **{name: value})

    def start(self, argv: list[str], **kwargs: object) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(argv, env=self.env(), cwd=self.root, **kwargs)  # type: ignore[call-overload]
        self.procs.append(proc)
        return proc

    def check(self) -> dict:  # type: ignore[type-arg]
        env = dict(self.env(), TPUCTL_IDLE_SCOPE=self.scope)
        done = subprocess.run(
            checked(self.bundle, "idle", "check"),
            env=env, capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        (line,) = done.stdout.splitlines()
        return dict(json.loads(line))

    def stop(self) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[Worker]:
    w = Worker(tmp_path)
    yield w
    w.stop()


def test_a_quiet_worker_is_idle(worker: Worker) -> None:
    worker.start(["sleep", "600"], stdin=subprocess.DEVNULL)  # runs, holds nothing
    result = worker.check()
    assert result["busy"] is False and result["reasons"] == []
    assert isinstance(result["checked"], int)


def test_a_process_holding_the_device_is_busy_until_it_lets_go(worker: Worker) -> None:
    with worker.device.open("rb") as device:
        holder = worker.start(["sleep", "600"], stdin=device)
    result = worker.check()
    assert result["busy"] is True
    assert f"pid {holder.pid} (sleep 600) holds {worker.device}" in result["reasons"]
    import getpass

    assert result["holders"] == [  # named for the watchdog's audit line
        {"pid": holder.pid, "command": "sleep 600", "user": getpass.getuser(),
         "device": str(worker.device)}
    ]  # fmt: skip
    holder.kill()
    holder.wait()
    assert worker.check()["busy"] is False


def test_a_hung_job_that_let_go_of_the_device_is_idle(worker: Worker) -> None:
    script = f"exec 3<{worker.device}; echo opened; exec 3<&-; exec sleep 600"
    hung = worker.start(["sh", "-c", script], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    assert hung.stdout and hung.stdout.readline() == b"opened\n"
    wait_for(lambda: "sleep" in Path(f"/proc/{hung.pid}/cmdline").read_text(), "the exec")
    result = worker.check()
    assert result["busy"] is False and result["reasons"] == []


def test_an_interactive_session_is_busy(worker: Worker) -> None:
    leader, follower = pty.openpty()
    try:
        shell = worker.start(["sleep", "600"], stdin=follower)
        result = worker.check()
    finally:
        os.close(follower)
        os.close(leader)
    assert result["busy"] is True
    assert f"interactive session: pid {shell.pid} (sleep 600) on a terminal" in result["reasons"]


def _fake(worker: Worker, name: str) -> Path:
    """A program that only sleeps, under the name of one of the agent's."""
    fake = worker.root / "fake" / name
    fake.parent.mkdir(exist_ok=True)
    fake.write_text("import time\ntime.sleep(600)\n")
    return fake


def _as_run(fake: Path, *args: str) -> list[str]:
    """The argv of a process that only sleeps, shaped as the runner runs the bundle
    (through its check, bundle.BOOTSTRAP) or, for `agent.py`, as a tpuctl of before."""
    if fake.name == "agent.py":
        return [AGENT_PYTHON, str(fake), *args]
    sleep = "import time; time.sleep(600)"
    return [AGENT_PYTHON, "-I", "-S", "-c", sleep, bundle.sha256(), str(fake), *args]


@pytest.mark.parametrize(
    "name, verbs",
    [
        (bundle.file_name(), ["agent", "run"]),
        (bundle.file_name(), ["agent", "start"]),
        ("agent.py", ["run"]),  # an agent a tpuctl of before the bundle started
    ],
)
def test_a_running_tpuctl_job_is_busy(worker: Worker, name: str, verbs: list[str]) -> None:
    fake = _fake(worker, name)
    agent = worker.start(_as_run(fake, *verbs, "--job-id", "j1"), stdin=subprocess.DEVNULL)
    result = worker.check()
    assert result["busy"] is True
    (said,) = [
        r for r in result["reasons"] if r.startswith(f"tpuctl job running: pid {agent.pid} ")
    ]
    assert "sleep" not in said  # an agent of the bundle: by its name, not the check's code


def test_the_bundles_other_programs_are_no_job(worker: Worker) -> None:
    fake = _fake(worker, bundle.file_name())
    log = worker.root / "attempt-1.log"
    for argv in (["follow", str(log), "0", "1"], ["idle", "watch"], ["agent", "--help"]):
        worker.start(_as_run(fake, *argv), stdin=subprocess.DEVNULL)
    result = worker.check()
    assert result["busy"] is False and result["reasons"] == []


def test_processes_outside_the_scope_do_not_count(worker: Worker, tmp_path: Path) -> None:
    (tmp_path / "other").mkdir()
    other = Worker(tmp_path / "other")
    other.device = worker.device  # the same device, held by another worker's process
    try:
        with worker.device.open("rb") as device:
            other.start(["sleep", "600"], stdin=device)
        assert worker.check()["busy"] is False
        assert other.check()["busy"] is True
    finally:
        other.stop()


def test_the_watchdog_wakes_at_an_expiry_its_first_look_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A node whose --max-cost ends 22 s after the boot: the first look (5 s in) reads the
    # expiry, and the next wake is at it, not a whole interval (60 s) later.
    from tpuctl.agent import idle

    clock = {"now": 1000.0}
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock["now"] += seconds

    monkeypatch.setattr(idle.time, "time", lambda: clock["now"])
    monkeypatch.setattr(idle.time, "sleep", sleep)

    class Node:
        path, token = "projects/p/locations/z/nodes/n", None

    dog = idle.Watchdog(Node(), 0, 60.0, "delete")  # type: ignore[arg-type]
    looks: list[float] = []

    def tick() -> bool:
        looks.append(clock["now"])
        dog.expires_at = 1022.0
        if clock["now"] >= dog.expires_at:
            raise idle.HttpError(404, "the node is gone")  # deleted at the expiry
        return False

    monkeypatch.setattr(dog, "tick", tick)
    assert dog.run() == 0
    assert looks == [1005.0, 1022.0], sleeps
