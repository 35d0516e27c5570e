"""A worker's PID namespace (sandbox.py): the process that holds it while the worker is
up, the command that joins it, and the machine's pid of a process it numbers.

A namespace lives as long as its init: bwrap's (pid 1 there, which reaps what is left to
it, as a VM's init does), started with a `sleep` under it. The holder ignores every signal
but SIGKILL, since a preemption's notice SIGTERMs the worker's processes (found by their
environment, which the holder shares) and the job must get it, not lose its namespace.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import time
from collections.abc import Callable

HOLDER_ENV = "TPUCTL_EMULATOR_HOLDER"  # 1 in a holder's environment: no process of the VM


class Command:
    """A worker's command as it is started: `argv`, and the descriptors it must be given
    (`pass_fds`: the worker's PID namespace, for bwrap to join); closed on leaving the
    `with` block, once the process has started."""

    def __init__(self, argv: list[str], fds: tuple[int, ...] = ()) -> None:
        self.argv = argv
        self.fds = fds

    def __enter__(self) -> Command:
        return self

    def __exit__(self, *exc: object) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)


class Holder:
    """The process that keeps a worker's PID namespace: bwrap's init (pid 1 there, which
    reaps what is left to it, as a VM's init does) and a `sleep` under it. When it ends,
    the kernel ends every process of the namespace: the worker's processes go with it."""

    def __init__(self, argv: Callable[[int], list[str]], env: dict[str, str]) -> None:
        """`argv(fd)`: the holder's command, bwrap saying its init's pid on `fd`."""
        read, write = os.pipe()
        try:
            self.proc = subprocess.Popen(
                argv(write),
                cwd="/",
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                pass_fds=(write,),
            )
        finally:
            os.close(write)
        try:
            info = _read_all(read, deadline=time.monotonic() + 20)
        finally:
            os.close(read)
        try:  # bwrap says its init's pid (as this machine numbers it)
            self.init = int(json.loads(info)["child-pid"])
        except (ValueError, KeyError, TypeError):
            self.stop()
            raise OSError(f"bwrap did not start a PID namespace ({info[:200]!r})") from None

    def alive(self) -> bool:
        """Running, its init neither a zombie nor on its way out (a namespace whose init
        has ended takes no new process)."""
        if self.proc.poll() is not None:
            return False
        try:
            with open(f"/proc/{self.init}/stat", "rb") as f:
                return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
        except (OSError, IndexError):
            return False

    def namespace(self) -> int:
        """A descriptor of the namespace (OSError once the holder has ended)."""
        return os.open(f"/proc/{self.init}/ns/pid", os.O_RDONLY)

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)


def _read_all(fd: int, deadline: float) -> bytes:
    data = b""
    while (left := deadline - time.monotonic()) > 0:
        if not select.select([fd], [], [], left)[0]:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    return data


def ns_pid(pid: int) -> int | None:
    """`pid`'s number in its own (innermost) PID namespace."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return int(line.split()[-1])
    except (OSError, ValueError):
        pass
    return None


def children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except (OSError, ValueError):
        return []
