"""What an emulated worker's SSH server does for one session: a command, a shell, SFTP.

Commands and shells run in the worker's sandbox (sandbox.py), in the worker's home, with
the worker's environment, in a session of their own, started by launcher.py, which
reports their pid (signals go to their process group) and their true wait status (bwrap
would turn a death by signal into an exit status). Output is copied by hand, stdout and
stderr apart, and the exit status is sent only once both are drained (asyncssh's
`redirect` can drop the tail of one stream when the other closes first). SFTP maps
absolute paths into the worker's root and refuses any that leads out of the worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import posixpath
import pty
import shutil
import signal
import struct
import sys
import termios
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncssh

from tpuctl.emulator.workers import guest_env
from tpuctl.emulator.workers.sandbox import Refused, Sandbox

CHUNK = 65536
LAUNCHER = str(Path(__file__).with_name("launcher.py"))
LAUNCHER_PL = str(Path(__file__).with_name("launcher.pl"))
# perl-base is essential on Debian; the sandbox shows /usr (elsewhere: launcher.py)
PERL = "/usr/bin/perl" if os.access("/usr/bin/perl", os.X_OK) else None
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
        sandbox: Sandbox,
    ) -> None:
        self.process = process
        self.home = home
        self.env = env
        self._track = track  # (pid, alive) -> False when the worker went down meanwhile
        self._sandbox = sandbox
        self._report: _Report | None = None

    def _environment(self) -> dict[str, str]:
        # a VM's environment (guest_env.py: pip's settings of the shell that started the
        # emulator stand for the image's; nothing else of that shell)
        env = guest_env.base()
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
        except Refused as exc:
            self.process.stderr.write(f"{exc}\n".encode())
            status = 127
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

    async def _spawn(self, tty: bool, **kwargs: Any) -> asyncio.subprocess.Process:
        """Start the session's command through a launcher, in the worker's sandbox."""
        report = _Report()
        env = self._environment()
        if tty or PERL is None:
            launch = [sys.executable, "-I", "-S", LAUNCHER, str(report.write), "01"[tty]]
        else:  # perl starts in ~3 ms, Python in ~10: this runs before every command
            drop = "PERL_BADLANG" not in env
            env.setdefault("PERL_BADLANG", "0")  # no locale warnings from the launcher
            launch = [PERL, LAUNCHER_PL, str(report.write), "01"[drop]]
        try:
            worker = Path(self.home).parent
            argv = [*launch, *self._argv()]
            with self._sandbox.command(worker, self.home, argv, env.get("HOSTNAME"), env) as cmd:
                proc = await asyncio.create_subprocess_exec(
                    *cmd.argv,
                    cwd=self.home,
                    env=env,
                    start_new_session=True,
                    pass_fds=(report.write, *cmd.fds),
                    **kwargs,
                )
        except BaseException:
            report.close()
            raise
        self._report = report
        report.started()
        if not self._track(proc.pid, True):  # the worker went down while it started
            _signal_group(proc.pid, signal.SIGKILL)
        return proc

    def _signal(self, proc: asyncio.subprocess.Process, sig: int) -> None:
        """Signal the command's process group (before it is known: the launcher's). The
        launcher says its pid as the worker's PID namespace numbers it: the machine's is
        found under bwrap (none: the command has ended)."""
        pid = self._report.pid if self._report else None
        if pid is None:
            _signal_group(proc.pid, sig)
        elif (host := self._sandbox.host_pid(proc.pid, pid)) is not None:
            _signal_group(host, sig)

    async def _status(self, proc: asyncio.subprocess.Process) -> int:
        """The command's exit status (-N: killed by signal N) once it and the launcher ended."""
        returncode = await proc.wait()
        assert self._report is not None and self._report.done is not None
        await self._report.done
        status = self._report.status
        if status is not None:
            return os.waitstatus_to_exitcode(status)
        if returncode > 128 and self._sandbox.confined:
            return 128 - returncode  # the launcher itself was killed: bwrap says 128 + N
        return returncode

    async def _hang_up_when_closed(self, proc: asyncio.subprocess.Process) -> None:
        """A client that goes away hangs up the session, as sshd does."""
        await self.process.channel.wait_closed()
        if proc.returncode is None:
            self._signal(proc, signal.SIGHUP)

    # -- without a terminal: three pipes ------------------------------------------
    async def _run_pipes(self) -> int:
        PIPE = asyncio.subprocess.PIPE
        proc = await self._spawn(False, stdin=PIPE, stdout=PIPE, stderr=PIPE)
        assert proc.stdin and proc.stdout and proc.stderr
        feeder = asyncio.ensure_future(self._feed(proc))
        watcher = asyncio.ensure_future(self._hang_up_when_closed(proc))
        try:
            await asyncio.gather(
                self._copy(proc.stdout, self.process.stdout),
                self._copy(proc.stderr, self.process.stderr),
            )
            return await self._status(proc)
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
                    self._signal(proc, _signal_number(sig.signal))
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
            proc = await self._spawn(True, stdin=slave, stdout=slave, stderr=slave)
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
            status = await self._status(proc)
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
                self._signal(proc, _signal_number(sig.signal))
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


class _Report:
    """The launcher's two lines on a pipe: the command's pid, then its wait status."""

    def __init__(self) -> None:
        self.read, self.write = os.pipe()
        self.pid: int | None = None
        self.status: int | None = None
        self.done: asyncio.Future[None] | None = None

    def started(self) -> None:
        """The launcher holds the write end now: let go of ours, and read."""
        os.close(self.write)
        self.done = asyncio.ensure_future(self._read())

    def close(self) -> None:
        for fd in (self.read, self.write):
            with contextlib.suppress(OSError):
                os.close(fd)

    async def _read(self) -> None:
        reader = asyncio.StreamReader()
        transport, _ = await asyncio.get_running_loop().connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(self.read, "rb", buffering=0)
        )
        try:
            line = await reader.readline()
            if line.strip().isdigit():
                self.pid = int(line)
                line = await reader.readline()
                if line.strip().isdigit():
                    self.status = int(line)
        finally:
            transport.close()


class HomeSftp(asyncssh.SFTPServer):
    """SFTP as the worker's commands see its files: relative paths and `~/` are the home's
    (as for OpenSSH's sftp-server, which starts in the user's home), absolute ones are in
    the worker's root, except those in the worker's own folder, which are where they are
    (HOME names the home by its path on this machine). A path that leads out of the
    worker's folder (`..`, a symlink) is refused, as sftp-server refuses what it may not
    touch. A worker that runs unconfined (`--unconfined`) has the machine's paths."""

    def __init__(self, chan: asyncssh.SSHServerChannel, home: str, confined: bool = True) -> None:
        super().__init__(chan)
        self._home = os.fsencode(home)
        self._worker = os.path.dirname(self._home)
        self._root = os.path.join(self._worker, b"root") if confined else None

    def _inside(self, path: bytes) -> bool:
        return path == self._worker or path.startswith(self._worker + b"/")

    def map_path(self, path: bytes) -> bytes:
        if path == b"~" or path.startswith(b"~/"):
            path = path[2:]
        if self._root is None:
            return os.path.join(self._home, path)
        if path.startswith(b"/"):
            path = posixpath.normpath(b"/" + path.lstrip(b"/"))  # "/.." is "/", as anywhere
            if not self._inside(path):
                path = self._root + path.rstrip(b"/")
        else:
            path = posixpath.normpath(posixpath.join(self._home, path))
        if not self._inside(os.path.realpath(path)):
            raise asyncssh.SFTPPermissionDenied("Permission denied")
        return path

    def reverse_map_path(self, path: bytes) -> bytes:
        if self._root is not None and (path == self._root or path.startswith(self._root + b"/")):
            return path[len(self._root) :] or b"/"
        return path


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
