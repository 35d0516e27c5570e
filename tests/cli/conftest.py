"""Run the real tpuctl entry point in-process against the emulator fixture."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.emulator.ssh_helpers import wait_until
from tpuctl.cli import main
from tpuctl.cli.options import AppEnv


@dataclass
class Result:
    code: int
    out: str
    err: str


Cli = Callable[..., Result]


@pytest.fixture
def cli(emulator, capsys, monkeypatch) -> Cli:  # noqa: ANN001
    def run(*args: str, tty: bool = False, stdin: str = "") -> Result:
        capsys.readouterr()
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        code = main(list(args), AppEnv(stdin_isatty=tty))
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


@pytest.fixture
def workers_have_jax(monkeypatch: pytest.MonkeyPatch) -> None:
    """The emulated workers' python3 is the suite's, with its jax (a dev dependency), for
    a test that runs JAX on a worker: by default it is a system Python without it, as a
    fresh TPU VM image's (emulator/workers/guest_env.py)."""
    from tpuctl.emulator.workers import guest_env

    monkeypatch.setenv(guest_env.PYTHON_ENV, sys.executable)


def one_line_error(result: Result, after_call: bool = False) -> str:
    """Assert the error is one `error:` line (plus at most a hint) and no traceback.

    `after_call`: the failure came from the cloud after the command had started (and
    said so on stderr, e.g. the price line before a create); only the lines from the
    error on are held to the rule.
    """
    lines = [ln for ln in result.err.splitlines() if ln.strip()]
    if after_call:
        first = next((i for i, ln in enumerate(lines) if ln.startswith("error: ")), 0)
        lines = lines[first:]
    assert "Traceback" not in result.err
    errors = [ln for ln in lines if ln.startswith("error: ")]
    assert len(errors) == 1, result.err
    assert all(ln.startswith(("error: ", "hint: ")) for ln in lines), result.err
    return errors[0]


@dataclass
class Spawned:
    """A real `tpuctl` process (for signals); its stderr read line by line as it comes."""

    proc: subprocess.Popen[str]
    err_lines: list[str] = field(default_factory=list)
    out: str = ""

    def wait_for(self, text: str, timeout: float = 30.0) -> None:
        """Until a line of stderr holds `text` (e.g. the progress line of a wait)."""
        wait_until(lambda: self.said(text) or self.proc.poll() is not None, repr(text), timeout)
        assert self.said(text), f"the process ended without saying {text!r}:\n{self.err}"

    def said(self, text: str) -> bool:
        return any(text in line for line in list(self.err_lines))

    @property
    def err(self) -> str:
        return "".join(self.err_lines)


@contextlib.contextmanager
def spawned(*args: str, timeout: float = 60.0) -> Iterator[Spawned]:
    """`tpuctl ARGS...` as a process of its own; at the end of the block it has ended
    (waited for up to `timeout` seconds, else killed) and its output is read."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tpuctl", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    run = Spawned(proc)

    def read_err() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            run.err_lines.append(line)

    def read_out() -> None:
        assert proc.stdout is not None
        run.out = proc.stdout.read()

    readers = [threading.Thread(target=read_err), threading.Thread(target=read_out)]
    for reader in readers:
        reader.start()
    try:
        yield run
        proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for reader in readers:
            reader.join()


def signalled_mid_call(emulator: Any, verb: str, *args: str) -> Spawned:
    """`tpuctl ARGS...` with every API call slowed to 1 s, sent SIGTERM once the call
    `verb` (as the emulator counts them, e.g. `POST create`) has reached the emulator,
    so while it is in flight; returns the ended process."""
    emulator.faults(delay=1.0)
    try:
        with spawned(*args) as p:
            wait_until(
                lambda: emulator.requests().get(verb, 0) > 0, f"{verb} to be sent", timeout=60
            )
            p.proc.send_signal(signal.SIGTERM)
    finally:
        emulator.faults()
    assert emulator.requests()[verb] == 1
    return p
