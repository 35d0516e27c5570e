"""The agent's stacks (agent/stacks.py) on real processes: the sitecustomize registers
faulthandler and still runs the one it hides, a take names the blocking line and leaves
the process running, and no process that did not register is ever signalled."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tpuctl.agent import sitehook, stacks

SCRIPT = """\
import threading
never = threading.Event()


def wait_for_peer():
    never.wait()  # blocks here


print("ready", flush=True)
wait_for_peer()
"""


@pytest.fixture
def job_dir(tmp_path: Path) -> Path:
    (tmp_path / "job" / "code").mkdir(parents=True)
    (tmp_path / "job" / "code" / "hang.py").write_text(SCRIPT)
    return tmp_path / "job"


def _script(
    job_dir: Path,
    env: dict[str, str],
    procs: list[subprocess.Popen[bytes]],
    name: str = "hang.py",
    python: str = sys.executable,
) -> int:
    """The job's script `name` (in job_dir/code) started as the agent starts it, once it
    printed `ready`: its pid."""
    env = dict(env, **sitehook.site_env(job_dir, env))
    p = subprocess.Popen(
        [python, name],
        cwd=job_dir / "code",
        env=env,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    procs.append(p)
    assert p.stdout is not None
    lines = [p.stdout.readline()]
    while lines[-1] not in (b"ready\n", b""):
        lines.append(p.stdout.readline())
    assert lines[-1] == b"ready\n", lines
    return p.pid


def _take_until(job_dir: Path, group: int, wanted: str) -> tuple[str, str]:
    deadline = time.monotonic() + 30
    while True:  # the script may still be between its print and its wait
        text, how = stacks.take(job_dir, group, 5.0)
        if wanted in text or time.monotonic() > deadline:
            return text, how
        time.sleep(0.1)


def test_a_take_names_the_blocking_line_and_the_job_runs_on(
    job_dir: Path, tmp_path: Path, procs, monkeypatch
) -> None:
    monkeypatch.setattr(stacks, "py_spy", lambda pid: None)  # faulthandler's way
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text('print("the other sitecustomize ran", flush=True)\n')
    pid = _script(job_dir, dict(os.environ, PYTHONPATH=str(other)), procs)
    text, how = _take_until(job_dir, pid, "in wait_for_peer")
    assert how == "faulthandler"
    assert f"== process {pid}: " in text
    assert 'File "hang.py", line 6 in wait_for_peer\n' in text  # the code folder left out
    assert "never.wait()  # blocks here" in text  # with its source line
    assert procs[0].poll() is None  # SIGUSR2 did not end it
    assert stacks.take(job_dir, pid, 5.0)[0].count("in wait_for_peer") == 1  # each take anew


def test_the_chained_sitecustomize_runs(job_dir: Path, tmp_path: Path, procs) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text('print("other ran", flush=True)\n')
    env = dict(os.environ, PYTHONPATH=str(other))
    env.update(sitehook.site_env(job_dir, env))
    done = subprocess.run(
        [sys.executable, "-c", "import sitecustomize, sys; print(sitecustomize.__file__)"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.splitlines()[0] == "other ran"


def test_only_processes_that_registered_are_signalled(job_dir: Path, procs, monkeypatch) -> None:
    monkeypatch.setattr(stacks, "py_spy", lambda pid: None)
    sitehook.site_env(job_dir, {})
    # a process of the group that is no Python, and a dump file whose pid does not hold it
    sleeper = subprocess.Popen(["sleep", "600"], start_new_session=True)
    procs.append(sleeper)  # type: ignore[arg-type]
    (job_dir / "stacks" / f"{sleeper.pid}.txt").write_text("")
    assert stacks.registered(job_dir / "stacks") == {}
    assert stacks.take(job_dir, sleeper.pid, 1.0) == ("", "")
    with pytest.raises(subprocess.TimeoutExpired):  # a SIGUSR2 would have ended it
        sleeper.wait(timeout=0.5)


def test_py_spy_is_used_where_the_vm_has_it(job_dir: Path, procs, monkeypatch) -> None:
    monkeypatch.setattr(stacks, "py_spy", lambda pid: f"Process {pid}: python hang.py\n(native)")
    pid = _script(job_dir, dict(os.environ), procs)
    text, how = stacks.take(job_dir, pid, 5.0)
    assert how == "py-spy" and "(native)" in text


def test_py_spy_without_native_frames_where_it_cannot_unwind_them(
    tmp_path: Path, monkeypatch
) -> None:
    tool = tmp_path / "bin" / "py-spy"
    tool.parent.mkdir()
    tool.write_text(
        "#!/bin/sh\n"
        'case "$*" in *--native*) exit 1;; esac\n'
        'echo "Process $3: python (python frames)"\n'
    )
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tool.parent}{os.pathsep}{os.environ['PATH']}")
    assert stacks.py_spy(4321) == "Process 4321: python (python frames)\n"
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert stacks.py_spy(4321) is None


def test_a_group_is_the_jobs_only_when_its_leader_is_a_child_of_the_jobs_agent(
    job_dir: Path, procs
) -> None:
    # this test's process stands for the agent: the agent is known by the attempt's lock
    # it holds open (agent.py); a group it started before holding it is not the job's
    sleeper = subprocess.Popen(["sleep", "600"], start_new_session=True)
    procs.append(sleeper)  # type: ignore[arg-type]
    why = stacks.job_group(job_dir, sleeper.pid)
    assert why == f"process group {sleeper.pid} was not started by job job's agent"
    with open(job_dir / "agent-1.start.lock", "w"):  # a start's lock is no agent's
        assert stacks.job_group(job_dir, sleeper.pid) == why
    with open(job_dir / "agent-2.lock", "w"):
        assert stacks.job_group(job_dir, sleeper.pid) == ""
    sleeper.kill()
    sleeper.wait()
    assert stacks.job_group(job_dir, sleeper.pid) == (
        f"process group {sleeper.pid} has no leader on this worker"
    )


def test_a_group_not_the_jobs_is_never_looked_at_and_it_is_said_once(
    job_dir: Path, tmp_path: Path, procs, monkeypatch, capsys
) -> None:
    """The group comes from the job's status in the bucket: a forged one names another
    process (here a Python one, which py-spy would dump), and only the job's registered
    processes are taken."""
    asked: list[int] = []

    def spy(pid: int) -> str:
        asked.append(pid)
        return f"Process {pid}: python\n"

    monkeypatch.setattr(stacks, "py_spy", spy)

    def no_token() -> None:
        raise OSError("no metadata server here")

    monkeypatch.setattr(stacks, "Token", no_token)  # (not stored in the bucket: said)
    victim = subprocess.Popen(
        [sys.executable, "-I", "-c", "import time; time.sleep(600)"], start_new_session=True
    )
    procs.append(victim)
    pid = _script(job_dir, dict(os.environ), procs)  # the job's own, registered
    root = tmp_path / "root"
    (root / "jobs").mkdir(parents=True)
    (root / "jobs" / "j1").symlink_to(job_dir)
    args = ["--job-id", "j1", "--bucket", "b", "--worker", "0", "--stamp", "s"]
    assert stacks.main([*args, "--root", str(root), "--group", str(victim.pid)]) == 0
    out, err = capsys.readouterr()
    assert asked == [pid] and f"Process {victim.pid}" not in out
    said = [ln for ln in err.splitlines() if str(victim.pid) in ln]
    assert said == [
        f"process group {victim.pid} was not started by job j1's agent: left alone "
        "(the job's status names it)"
    ]
    assert victim.poll() is None
