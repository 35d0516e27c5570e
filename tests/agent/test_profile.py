"""The agent's profile (agent/profile.py) on real processes: tpuctl's sitecustomize starts
the listener only in a process that imports jax or tensorflow, a take traces a real JAX
script while its main thread is blocked in a computation, and the TensorFlow path calls
TensorFlow's own profiler (a stand-in module: TensorFlow itself is not installed here)."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.agent.test_stacks import _script
from tpuctl.agent import profile

# The main thread is blocked in one computation after another (the GIL released), until
# the process is ended (tests/cli/test_profile.py runs it as a job too).
JAX_SCRIPT = """\
import os

os.environ["JAX_PLATFORMS"] = "cpu"
import jax
import jax.numpy as jnp


@jax.jit
def step(x):
    for _ in range(8):
        x = jnp.tanh(x @ x)
    return x


x = jnp.ones((256, 256))
step(x).block_until_ready()
print("ready", flush=True)
while True:
    x = step(x).block_until_ready()
"""
# A stand-in for TensorFlow's profiler API (tf.profiler.experimental.start / stop), which
# writes what TensorFlow's writes, where it writes it.
FAKE_TF = """\
import os, types

experimental = types.SimpleNamespace()
_dir = []


def _start(logdir):
    _dir.append(logdir)
    open(os.path.join(logdir, "started"), "w").close()


def _stop():
    run = os.path.join(_dir.pop(), "plugins", "profile", "2026_01_01_00_00_00")
    os.makedirs(run)
    with open(os.path.join(run, "host.xplane.pb"), "wb") as f:
        f.write(b"tf-trace")


experimental.start, experimental.stop = _start, _stop
"""
TF_SCRIPT = """\
import threading
import tensorflow

print("ready", flush=True)
threading.Event().wait()
"""
PLAIN_SCRIPT = 'import threading\nprint("ready", flush=True)\nthreading.Event().wait()\n'


def _start(
    job_dir: Path, script: str, procs: list, path: str = "", python: str = sys.executable
) -> int:
    (job_dir / "code").mkdir(parents=True, exist_ok=True)
    (job_dir / "code" / "main.py").write_text(script)
    env = dict(os.environ, PYTHONPATH=path) if path else dict(os.environ)
    return _script(job_dir, env, procs, "main.py", python)


def test_a_plain_script_has_no_listener(tmp_path: Path, procs) -> None:
    _start(tmp_path / "job", PLAIN_SCRIPT, procs)
    assert profile.listeners(tmp_path / "job" / "profile") == []
    assert profile.take(tmp_path / "job" / "profile", "t1", time.time(), 0.1, 5.0) == {}


def _fake_tensorflow(tmp_path: Path) -> Path:
    """A folder for PYTHONPATH with the stand-in `tensorflow` in it."""
    lib = tmp_path / "lib" / "tensorflow"
    (lib / "profiler").mkdir(parents=True)
    (lib / "__init__.py").write_text("from . import profiler\n")
    (lib / "profiler" / "__init__.py").write_text(FAKE_TF)
    return lib.parent


def test_the_tensorflow_path_calls_tensorflows_profiler(tmp_path: Path, procs) -> None:
    pid = _start(tmp_path / "job", TF_SCRIPT, procs, path=str(_fake_tensorflow(tmp_path)))
    folder = tmp_path / "job" / "profile"
    assert profile.listeners(folder) == [pid]
    answers = profile.take(folder, "t1", time.time(), 0.2, 30.0)
    assert answers[pid]["framework"] == "tensorflow" and "error" not in answers[pid]
    trace = profile.trace_of(folder / "t1" / str(pid))
    assert trace is not None and trace.read_bytes() == b"tf-trace"


def test_a_second_take_meanwhile_is_told_the_first_runs(tmp_path: Path, procs) -> None:
    lib = _fake_tensorflow(tmp_path)
    pid = _start(tmp_path / "job", TF_SCRIPT, procs, path=str(lib))
    folder = tmp_path / "job" / "profile"
    first = threading.Thread(target=profile.take, args=(folder, "t1", time.time(), 3.0, 30.0))
    first.start()
    try:
        started = folder / "t1" / str(pid) / "started"  # the stand-in's mark
        wait = time.monotonic() + 30
        while not started.exists() and time.monotonic() < wait:
            time.sleep(0.05)
        answers = profile.take(folder, "t2", time.time(), 0.1, 30.0)
        assert "being taken already" in answers[pid]["error"], answers
    finally:
        first.join()
    assert profile.trace_of(folder / "t1" / str(pid)) is not None  # the first one came


def test_an_ended_process_is_passed_over(tmp_path: Path) -> None:
    folder = tmp_path / "profile"
    folder.mkdir()
    os.mkfifo(folder / "999999.fifo")  # no process reads it
    assert profile.take(folder, "t1", time.time(), 0.1, 1.0) == {}


@pytest.mark.parametrize(
    ("at", "now", "start", "said"),
    [
        (100.0, 99.0, 100.0, ""),
        (90.0, 100.0, 100.0, "10.0s past"),
        (500.0, 100.0, 100.0, "400s ahead"),
    ],
)
def test_a_start_time_a_wrong_clock_gave_starts_now(at, now, start, said) -> None:
    got, note = profile.start_time(at, now)
    assert got == start and said in note and bool(note) == bool(said)


def test_a_jax_script_blocked_in_computation_is_traced(tmp_path: Path, procs) -> None:
    from jax.profiler import ProfileData

    pid = _start(tmp_path / "job", JAX_SCRIPT, procs)
    folder = tmp_path / "job" / "profile"
    at = time.time() + 0.5
    answers = profile.take(folder, "t1", at, 1.0, 60.0)
    assert answers[pid]["framework"] == "jax", answers
    assert at - 0.05 <= answers[pid]["began"] <= at + 1.0
    trace = profile.trace_of(folder / "t1" / str(pid))
    assert trace is not None and trace.parent.parent.name == "profile"
    planes = [p.name for p in ProfileData.from_file(str(trace)).planes]
    assert "/host:CPU" in planes, planes
    assert procs[0].poll() is None  # the job runs on
