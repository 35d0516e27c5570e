"""What an emulated worker's SSH server does for one session: a command, a shell, SFTP.

Commands and shells run as local processes, in the worker's home, with the worker's
environment, in a session of their own. Output is copied by hand, stdout and stderr
apart, and the exit status is sent only once both are drained (asyncssh's `redirect`
can drop the tail of one stream when the other closes first).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import pty
import shutil
import signal
import struct
import sys
import termios
from collections.abc import Callable
from typing import Any

import asyncssh

CHUNK = 65536
# Makes the PTY the child's controlling terminal, then runs the shell (no preexec_fn:
# it is unsafe in a threaded process).
_CTTY = (
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execvp(sys.argv[1], sys.argv[1:])"
)
# Client variables a session accepts, as OpenSSH's default AcceptEnv does.
_ACCEPT_ENV = ("LANG", "LC_")


def login_shell() -> str:
    return shutil.which("bash") or "/bin/sh"


class Session:
    """Runs one SSH session's process for a worker."""

    def __init__(
        self,
        process: asyncssh.SSHServerProcess,
        home: str,
        env: dict[str, str],
        track: Callable[[int, bool], bool],
    ) -> None:
        self.process = process
        self.home = home
        self.env = env
        self._track = track  # (pid, alive) -> False when the worker went down meanwhile

    def _environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "TPUCTL_EMULATOR_HOST"}
        env.update(self.env)
        user = self.process.get_extra_info("username") or ""
        env.update({"USER": user, "LOGNAME": user, "SHELL": login_shell()})
        for key, value in (self.process.env or {}).items():
            if isinstance(key, str) and key.startswith(_ACCEPT_ENV) and isinstance(value, str):
                env[key] = value
        return env

    def _argv(self) -> list[str]:
        command = self.process.command
        if command is None:
            return [login_shell(), "-l"]
        return [login_shell(), "-c", command]

    async def run(self) -> None:
        try:
            if self.process.get_terminal_type():
                status = await self._run_pty()
            else:
                status = await self._run_pipes()
        except OSError as exc:
            self.process.stderr.write(f"tpuctl emulator: cannot run: {exc}\n".encode())
            status = 127
        self._exit(status)

    def _exit(self, status: int) -> None:
        with contextlib.suppress(OSError, asyncssh.Error):
            if status < 0:
                name = signal.Signals(-status).name.removeprefix("SIG")
                self.process.exit_with_signal(name)
            else:
                self.process.exit(status)

    async def _spawn(self, argv: list[str], **kwargs: Any) -> asyncio.subprocess.Process:
        proc = await asyncio.create_subprocess_exec(
            *argv, cwd=self.home, env=self._environment(), start_new_session=True, **kwargs
        )
        if not self._track(proc.pid, True):  # the worker went down while it started
            _signal_group(proc.pid, signal.SIGKILL)
        return proc

    async def _hang_up_when_closed(self, proc: asyncio.subprocess.Process) -> None:
        """A client that goes away hangs up the session, as sshd does."""
        await self.process.channel.wait_closed()
        if proc.returncode is None:
            _signal_group(proc.pid, signal.SIGHUP)

    # -- without a terminal: three pipes ------------------------------------------
    async def _run_pipes(self) -> int:
        PIPE = asyncio.subprocess.PIPE
        proc = await self._spawn(self._argv(), stdin=PIPE, stdout=PIPE, stderr=PIPE)
        assert proc.stdin and proc.stdout and proc.stderr
        feeder = asyncio.ensure_future(self._feed(proc))
        watcher = asyncio.ensure_future(self._hang_up_when_closed(proc))
        try:
            await asyncio.gather(
                self._copy(proc.stdout, self.process.stdout),
                self._copy(proc.stderr, self.process.stderr),
            )
            return await proc.wait()
        finally:
            feeder.cancel()
            watcher.cancel()
            self._track(proc.pid, False)

    async def _copy(self, source: asyncio.StreamReader, sink: asyncssh.SSHWriter) -> None:
        while chunk := await source.read(CHUNK):
            try:
                sink.write(chunk)
                await sink.drain()
            except (OSError, asyncssh.Error):
                pass  # the client is gone: keep draining so the process can finish

    async def _feed(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdin
        try:
            while True:
                try:
                    data = await self.process.stdin.read(CHUNK)
                except asyncssh.SignalReceived as sig:
                    _signal_group(proc.pid, _signal_number(sig.signal))
                    continue
                except (asyncssh.TerminalSizeChanged, asyncssh.BreakReceived):
                    continue
                if not data:
                    break
                proc.stdin.write(data)
                await proc.stdin.drain()
        except (OSError, asyncssh.Error):
            pass
        finally:
            with contextlib.suppress(OSError):
                proc.stdin.close()

    # -- with a terminal: a real PTY ----------------------------------------------------
    async def _run_pty(self) -> int:
        master, slave = pty.openpty()
        try:
            _set_size(master, self.process.get_terminal_size())
            env_term = self.process.get_terminal_type() or "xterm"
            self.env = {**self.env, "TERM": env_term}
            argv = [sys.executable, "-c", _CTTY, *self._argv()]
            proc = await self._spawn(argv, stdin=slave, stdout=slave, stderr=slave)
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)
        os.set_blocking(master, False)
        output = asyncio.ensure_future(self._pty_output(master))
        feeder = asyncio.ensure_future(self._pty_input(master, proc))
        watcher = asyncio.ensure_future(self._hang_up_when_closed(proc))
        try:
            status = await proc.wait()
            # Output the shell wrote just before exiting is still in the PTY: drain it.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(output), 0.5)
            return status
        finally:
            for task in (output, feeder, watcher):
                task.cancel()
            self._track(proc.pid, False)
            os.close(master)

    async def _pty_output(self, master: int) -> None:
        loop = asyncio.get_running_loop()
        ready = asyncio.Event()
        loop.add_reader(master, ready.set)
        try:
            while True:
                await ready.wait()
                ready.clear()
                try:
                    data = os.read(master, CHUNK)
                except BlockingIOError:
                    continue
                except OSError:  # EIO: every process holding the terminal has closed it
                    return
                if not data:
                    return
                with contextlib.suppress(OSError, asyncssh.Error):
                    self.process.stdout.write(data)
                    await self.process.stdout.drain()
        finally:
            loop.remove_reader(master)

    async def _pty_input(self, master: int, proc: asyncio.subprocess.Process) -> None:
        while True:
            try:
                data = await self.process.stdin.read(CHUNK)
            except asyncssh.TerminalSizeChanged as change:
                _set_size(master, (change.width, change.height, change.pixwidth, change.pixheight))
                continue
            except asyncssh.SignalReceived as sig:
                _signal_group(proc.pid, _signal_number(sig.signal))
                continue
            except asyncssh.BreakReceived:
                continue
            except (OSError, asyncssh.Error):
                return
            if not data:
                return
            view = memoryview(data)
            while view:
                try:
                    view = view[os.write(master, view) :]
                except BlockingIOError:
                    await asyncio.sleep(0.01)
                except OSError:
                    return


class HomeSftp(asyncssh.SFTPServer):
    """SFTP rooted nowhere: absolute paths are the machine's, relative ones the home's
    (as OpenSSH's sftp-server, which starts in the user's home); `~/` means the home."""

    def __init__(self, chan: asyncssh.SSHServerChannel, home: str) -> None:
        super().__init__(chan)
        self._home = os.fsencode(home)

    def map_path(self, path: bytes) -> bytes:
        if path == b"~" or path.startswith(b"~/"):
            path = path[2:]
        return os.path.join(self._home, path)


def _set_size(fd: int, size: tuple[int, int, int, int]) -> None:
    cols, rows, xpix, ypix = size
    with contextlib.suppress(OSError):
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, xpix, ypix))


def _signal_number(name: str) -> int:
    try:
        return int(signal.Signals[f"SIG{name}"])
    except KeyError:
        return int(signal.SIGTERM)


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pid, sig)
