"""The emulator as a process of its own: started, found and stopped through a record.

A running emulator is recorded in STATE_DIR/emulator.json (`{pid, host, port}`); its
nodes live in STATE_DIR/state.json, so they outlive a restart. Invariants:
- A record names a running emulator only while its pid is alive, not a zombie, and a
  tpuctl process (a recycled pid is not ours); anything else is a stale record.
- The record is written only by the process that serves, or by the parent that just
  started it (and removed again when that start fails); it is replaced atomically.
- Whoever removes a record removes it only when it still names the pid it stopped.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tpuctl.emulator.control.client import ControlError, EmulatorControl
from tpuctl.emulator.core.ports import port_free
from tpuctl.emulator.storage.server import StorageError, binary_path
from tpuctl.emulator.workers.files import kill_marked
from tpuctl.emulator.workers.sandbox import Sandbox

RECORD = "emulator.json"
LOG = "emulator.log"
START_TIMEOUT = 15.0
STOP_TIMEOUT = 10.0


class StartError(Exception):
    """What keeps an emulator from starting, for `tpuctl emulator start` to report:
    `kind` is "config" (something it needs is not installed), "usage" (what was asked
    cannot be, e.g. a port in use) or "failed" (it started and did not answer)."""

    def __init__(self, message: str, hint: str | None = None, kind: str = "failed") -> None:
        super().__init__(message)
        self.message, self.hint, self.kind = message, hint, kind


@dataclass(frozen=True)
class Record:
    """Where an emulator started on a state dir serves, and its pid."""

    pid: int
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def read_record(directory: Path) -> Record | None:
    try:
        data = json.loads((directory / RECORD).read_text())
        return Record(int(data["pid"]), str(data["host"]), int(data["port"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_record(directory: Path, record: Record) -> None:
    tmp = directory / f".{RECORD}.tmp"
    data = {"pid": record.pid, "host": record.host, "port": record.port}
    tmp.write_text(json.dumps(data) + "\n")
    os.replace(tmp, directory / RECORD)


def remove_record(directory: Path, pid: int | None = None) -> None:
    """Remove the record (only if it still names `pid`, when one is given)."""
    record = read_record(directory)
    if pid is None or (record is not None and record.pid == pid):
        (directory / RECORD).unlink(missing_ok=True)


def alive(pid: int) -> bool:
    """The process exists (also when another user's) and is not a zombie (an unreaped
    one counts as gone: a detached emulator's parent may be long gone without reaping it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, and is another user's
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _is_tpuctl(pid: int) -> bool:
    """Guards against a recycled pid: the process must be tpuctl's (where /proc tells)."""
    try:
        return b"tpuctl" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return not Path("/proc/self").exists()


def running(directory: Path) -> Record | None:
    """The emulator started on `directory`, if it still runs."""
    record = read_record(directory)
    if record is not None and alive(record.pid) and _is_tpuctl(record.pid):
        return record
    return None


def status(address: str) -> dict[str, Any] | None:
    """The emulator's status, or None if nothing answers at `address`."""
    try:
        return EmulatorControl(address, timeout=2).status()
    except (OSError, ValueError, ControlError):
        return None


def forget_state(directory: Path) -> None:
    """Before a start: drop what a previous emulator kept in `directory` (its nodes,
    requests, instances and settings in state.json, its buckets under storage/), so the
    next one starts as at its first start. Its log and the ports it had are kept."""
    import shutil

    from tpuctl.emulator.core.persistence import STATE_FILE

    (directory / STATE_FILE).unlink(missing_ok=True)
    shutil.rmtree(directory / "storage", ignore_errors=True)


def prepare_start(directory: Path, host: str, port: int) -> None:
    """Raise what stops a new emulator on host:port (its Cloud Storage server, the
    `emulator` extra, is not installed: kind "config"; the port is taken: kind "usage"),
    and make the state dir."""
    try:
        binary_path()
    except StorageError as exc:
        raise StartError(str(exc), kind="config") from None
    if not port_free(host, port):
        raise StartError(
            f"port {port} on {host} is in use", hint="pick another with --port", kind="usage"
        )
    directory.mkdir(parents=True, exist_ok=True)


def wait_until_answering(record: Record, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if status(record.address) is not None:
            return
        if not alive(record.pid):
            raise StartError(
                f"the emulator (pid {record.pid}) exited before it answered on {record.address}",
                hint=f"see its log: {log}",
            )
        time.sleep(0.05)
    raise StartError(
        f"the emulator (pid {record.pid}) did not answer on {record.address} "
        f"within {START_TIMEOUT:.0f} s",
        hint=f"see its log: {log}; stop it with `tpuctl emulator stop`",
    )


def sandbox_warning(unconfined: bool) -> str | None:
    """One line when bubblewrap cannot confine the workers here (workers/sandbox.py), else None."""
    return Sandbox(unconfined=unconfined or None).warning()


def start_detached(
    directory: Path, host: str, port: int, ssh_port: int | None, unconfined: bool = False
) -> Record:
    """Start `python -m tpuctl.emulator` in a session of its own; return once it answers."""
    log = directory / LOG
    package_root = str(Path(__file__).resolve().parents[2])
    child_env = dict(os.environ)
    child_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (package_root, child_env.get("PYTHONPATH", "")) if p
    )
    command = [sys.executable, "-m", "tpuctl.emulator", "--host", host, "--port", str(port)]
    if ssh_port:
        command += ["--ssh-port", str(ssh_port)]
    if unconfined:
        command.append("--unconfined")
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [*command, "--state-dir", str(directory)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
            env=child_env,
        )
    record = Record(proc.pid, host, port)
    write_record(directory, record)
    try:
        wait_until_answering(record, log)
    except StartError:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        remove_record(directory, proc.pid)
        raise
    proc.returncode = 0  # it runs on in its own session: keep Popen from reporting it
    return record


def _raise_interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def serve(
    directory: Path,
    host: str,
    port: int,
    ssh_port: int | None,
    ready: Callable[[], None],
    unconfined: bool = False,
) -> None:
    """Serve in this process, calling `ready()` once it answers, until SIGTERM or Ctrl-C."""
    from tpuctl.emulator.core.server import EmulatorServer

    server = EmulatorServer(host, port, directory, ssh_port=ssh_port, unconfined=unconfined or None)
    try:
        server.start()
    except OSError:
        raise StartError(
            f"port {port} on {host} is in use", hint="pick another with --port", kind="usage"
        ) from None
    except StorageError as exc:
        raise StartError(f"cannot start the emulator's Cloud Storage: {exc}") from None
    write_record(directory, Record(os.getpid(), host, port))
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        ready()
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.stop()
        remove_record(directory, os.getpid())


def stop(directory: Path) -> Record | None:
    """Stop the emulator started on `directory` (SIGTERM, then SIGKILL after
    STOP_TIMEOUT) and remove its record; None if none was running."""
    record = running(directory)
    if record is None:
        remove_record(directory)  # a stale one
        return None
    os.kill(record.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    while alive(record.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if alive(record.pid):
        os.kill(record.pid, signal.SIGKILL)
        while alive(record.pid):
            time.sleep(0.05)
    # An emulator that had to be SIGKILLed (a request holding its lock) ended none of its
    # workers: their processes and PID namespace holders (which take nothing but SIGKILL)
    # would outlive it. Its workers' markers begin with its pid (files.WorkerFiles).
    kill_marked(f"{record.pid}.")
    remove_record(directory)
    return record
