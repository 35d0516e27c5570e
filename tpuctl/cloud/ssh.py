"""SshApi: tpuctl's SSH client (asyncssh), the one place that imports asyncssh.

Host keys are always checked strictly against a known-hosts file tpuctl wrote from
what the cloud publishes; no agent and no ~/.ssh/config are consulted, so a run
behaves the same on every machine. Failures become tpuctl errors that say which
worker and what to do: `Unreachable` (worth retrying while a VM boots),
`AuthRejected`, `HostKeyMismatch` (never retried) and `ConnectionDropped`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import asyncssh

from tpuctl.errors import (
    AuthRejected,
    ConfigError,
    ConnectionDropped,
    HostKeyMismatch,
    SshError,
    Unreachable,
)

if TYPE_CHECKING:
    from tpuctl.cloud.oslogin import OsLoginApi

CHUNK = 65536
CLOSE_WAIT = 5.0  # seconds a command's channel may take to close once left (see `_close`)
# AES-GCM first: OpenSSL does it in hardware, asyncssh's ChaCha20-Poly1305 costs CPU
# per packet. Both ends support all of these.
_CIPHERS = [
    "aes128-gcm@openssh.com",
    "aes256-gcm@openssh.com",
    "chacha20-poly1305@openssh.com",
    "aes128-ctr",
    "aes256-ctr",
]
Output = Callable[[str, bytes], None]
"""Receives ("stdout" | "stderr", bytes) as a remote command writes them."""
# Handshakes in flight at once, whatever the number of workers: key exchanges are CPU work
# for the client, and 1,500 of them at once only make every one of them slower (and risk
# their timeouts); sessions already open are not limited by this, only by file descriptors.
CONNECTING_AT_ONCE = 64
# File descriptors kept free for everything else the process opens, and per connection
# (its socket, and a local file an SFTP copy may hold open).
_FD_RESERVE = 64
_FDS_PER_CONNECTION = 2


@dataclass(frozen=True)
class Endpoint:
    """Where one worker's SSH server answers."""

    worker: int
    host: str
    port: int

    @property
    def host_pattern(self) -> str:
        """The known-hosts name OpenSSH and asyncssh look up for this endpoint."""
        return self.host if self.port == 22 else f"[{self.host}]:{self.port}"


def ensure_key_pair(path: Path, comment: str) -> str:
    """The public key (`ssh-ed25519 AAAA... comment`) of the key at `path`, creating an
    ed25519 key pair there (private 0600, `.pub` beside it) when there is none.

    Several tpuctl processes starting at once on a new machine (a sweep's `tpuctl run`s)
    make one key between them: the check and the creation happen under a lock on the key's
    folder, or each would write its own key and authorize it while the file ends up
    holding another's, and the VMs would refuse it. The line returned is always derived
    from the private key itself, the one connections sign with; a `.pub` that does not
    match it (another tool rewrote one of the two) is not trusted."""
    public = path.with_name(path.name + ".pub")
    if not path.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with _folder_locked(path.parent):
            if not path.exists():  # nobody made it while this process waited
                _create_key_pair(path, public, comment)
    try:
        key = asyncssh.read_private_key(path)
    except (asyncssh.KeyImportError, OSError) as e:
        raise ConfigError(
            f"cannot read the SSH key {path}: {e}",
            hint="tpuctl needs a key without a passphrase there (or move it away and let "
            "tpuctl create one)",
        ) from e
    derived = key.export_public_key().decode().strip()
    with contextlib.suppress(OSError, UnicodeDecodeError):
        line = public.read_text().strip()
        if line.split()[:2] == derived.split()[:2]:
            return line  # the same key: with the comment the .pub gives it
    return derived


def _create_key_pair(path: Path, public: Path, comment: str) -> None:
    """A new ed25519 pair: the `.pub` first, then the private key, each whole (written
    aside, then renamed), so whoever sees the private key sees its `.pub` too."""
    key = asyncssh.generate_private_key("ssh-ed25519", comment=comment)
    for target, data, mode in (
        (public, key.export_public_key(), 0o644),
        (path, key.export_private_key(), 0o600),
    ):
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "wb") as f:
            f.write(data)
        os.replace(tmp, target)


@contextlib.contextmanager
def _folder_locked(folder: Path) -> Iterator[None]:
    """An exclusive lock on `folder` itself (flock on its descriptor: no lock file is left
    in ~/.ssh), let go when the block ends or the process dies."""
    import fcntl

    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class SshApi:
    """Opens SSH connections to TPU VM workers on one port (22 in the cloud). `oslogin`
    is the OS Login directory for nodes that use it (None: `ssh-keys` only)."""

    def __init__(self, port: int, oslogin: OsLoginApi | None = None) -> None:
        self.port = port
        self.oslogin = oslogin
        self._known_hosts: dict[Path, tuple[tuple[int, int], asyncssh.SSHKnownHosts]] = {}
        self._keys: dict[Path, asyncssh.SSHKey] = {}
        self._gates: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[asyncio.Semaphore, asyncio.Semaphore]
        ] = weakref.WeakKeyDictionary()
        self._budget: int | None = None

    def connection_budget(self) -> int:
        """How many connections may be open at once in this process: the open-files limit
        (its soft value raised to the hard one first, as OpenSSH's own tools do not, so
        a 1,500-worker slice fails on a laptop's 256 or 1,024) less what is open already."""
        if self._budget is None:
            self._budget = _connection_budget()
        return self._budget

    def _gates_here(self) -> tuple[asyncio.Semaphore, asyncio.Semaphore]:
        """(connections open, handshakes in flight) for the running event loop."""
        loop = asyncio.get_running_loop()
        gates = self._gates.get(loop)
        if gates is None:
            gates = (
                asyncio.Semaphore(self.connection_budget()),
                asyncio.Semaphore(CONNECTING_AT_ONCE),
            )
            self._gates[loop] = gates
        return gates

    def _trusted(self, path: Path) -> asyncssh.SSHKnownHosts:
        """The known-hosts file, parsed once per change (not once per worker)."""
        st = path.stat()
        version = (st.st_ino, st.st_mtime_ns)  # tpuctl replaces the file on every write
        cached = self._known_hosts.get(path)
        if cached is None or cached[0] != version:
            cached = (version, asyncssh.read_known_hosts(str(path)))
            self._known_hosts[path] = cached
        return cached[1]

    def endpoint(self, worker: int, host: str) -> Endpoint:
        return Endpoint(worker, host, self.port)

    @contextlib.asynccontextmanager
    async def session(
        self, ep: Endpoint, user: str, key_path: Path, known_hosts: Path, timeout: float = 20.0
    ) -> AsyncIterator[Session]:
        """A connection to one worker, closed on exit; raises an `SshError`. Waits for a
        free slot when the process has as many connections open as it has files for, or
        `CONNECTING_AT_ONCE` handshakes in flight."""
        where = f"worker {ep.worker} ({ep.host}:{ep.port})"
        try:
            key = self._keys.get(key_path) or asyncssh.read_private_key(key_path)
        except (asyncssh.KeyImportError, OSError) as e:
            raise ConfigError(f"cannot read the SSH key {key_path}: {e}") from e
        self._keys[key_path] = key
        open_slots, connecting = self._gates_here()
        async with open_slots:
            async with connecting:
                conn = await self._connect(ep, where, user, key, key_path, known_hosts, timeout)
            try:
                yield Session(conn, where)
            finally:
                conn.close()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(conn.wait_closed(), 5)

    async def _connect(
        self,
        ep: Endpoint,
        where: str,
        user: str,
        key: asyncssh.SSHKey,
        key_path: Path,
        known_hosts: Path,
        timeout: float,
    ) -> asyncssh.SSHClientConnection:
        try:
            return await asyncssh.connect(
                ep.host,
                ep.port,
                username=user,
                client_keys=[key],
                known_hosts=self._trusted(known_hosts),
                config=[],
                agent_path=None,
                preferred_auth="publickey",
                encryption_algs=_CIPHERS,
                connect_timeout=timeout,
                keepalive_interval=15,
                keepalive_count_max=4,
            )
        except asyncssh.HostKeyNotVerifiable as e:
            raise HostKeyMismatch(
                f"{where} presented an SSH host key that is not the one the cloud publishes "
                "for it: refused"
            ) from e
        except asyncssh.PermissionDenied as e:
            raise AuthRejected(f"{where}: the server refused the key {key_path} for {user}") from e
        except (OSError, asyncio.TimeoutError, asyncssh.DisconnectError) as e:
            raise Unreachable(f"{where}: {_reason(e)}") from e


async def _close(proc: asyncssh.SSHClientProcess[bytes]) -> None:
    """Close a command's channel and wait for the server's close, `CLOSE_WAIT` seconds at
    most: asyncssh's own exit of a process waits for it without end, and a server that
    never answers (a worker going away) would hold the caller, e.g. a run whose job is
    over waiting on its log stream for good."""
    proc.close()
    with contextlib.suppress(Exception):  # the timeout, or a connection already lost
        await asyncio.wait_for(proc.wait_closed(), CLOSE_WAIT)


class Session:
    """One open connection: run commands, copy files."""

    def __init__(self, conn: asyncssh.SSHClientConnection, where: str) -> None:
        self._conn = conn
        self._where = where

    async def run(self, command: str, output: Output, stdin: bytes | None = None) -> int:
        """Run `command` (a shell command line); feed it `stdin` (else stdin is closed);
        stream its output; return its exit status (128 + N when killed by signal N)."""
        try:
            proc = await self._conn.create_process(
                command, encoding=None, stdin=asyncssh.PIPE if stdin else asyncssh.DEVNULL
            )
            try:
                if stdin:
                    proc.stdin.write(stdin)
                    proc.stdin.write_eof()

                async def pump(stream: asyncssh.SSHReader[bytes], name: str) -> None:
                    while chunk := await stream.read(CHUNK):
                        output(name, chunk)

                await asyncio.gather(pump(proc.stdout, "stdout"), pump(proc.stderr, "stderr"))
                await proc.wait()
            finally:  # also when cancelled (a log stream once its job is over)
                await _close(proc)
        except (OSError, asyncssh.Error) as e:
            raise ConnectionDropped(f"{self._where}: connection lost: {_reason(e)}") from e
        if proc.exit_status is not None and proc.exit_status >= 0:
            return int(proc.exit_status)
        if proc.exit_signal:
            import signal

            with contextlib.suppress(KeyError):
                return 128 + int(signal.Signals[f"SIG{proc.exit_signal[0]}"])
        raise ConnectionDropped(f"{self._where}: the command ended without an exit status")

    async def put(self, sources: Sequence[Path], target: str, recurse: bool) -> None:
        """Copy local files (folders with `recurse`) to `target` on the worker; a target
        ending in `/`, or one for several sources, is a folder, made when missing."""
        names = [str(p) for p in sources]

        async def put(sftp: asyncssh.SFTPClient) -> None:
            if target and (len(names) > 1 or target.endswith("/")):
                await sftp.makedirs(target, exist_ok=True)
            await sftp.put(names, target or ".", recurse=recurse)

        await self._sftp(put, target or "~")

    async def get(self, sources: Sequence[str], target: Path, recurse: bool) -> None:
        """Copy files from the worker to the local `target`."""

        async def get(sftp: asyncssh.SFTPClient) -> None:
            await sftp.get(list(sources), str(target), recurse=recurse)

        await self._sftp(get, ", ".join(sources))

    async def _sftp(
        self, action: Callable[[asyncssh.SFTPClient], Awaitable[None]], subject: str
    ) -> None:
        try:
            async with self._conn.start_sftp_client() as sftp:
                await action(sftp)
        except asyncssh.SFTPError as e:
            raise SshError(f"{self._where}: {e.reason}: {subject}") from e
        except asyncssh.ChannelOpenError as e:
            raise SshError(f"{self._where}: cannot start SFTP: {e.reason}") from e
        except OSError as e:
            where = f"{self._where}: {e.strerror or e}: {e.filename or subject}"
            raise SshError(where) from e
        except asyncssh.Error as e:
            raise ConnectionDropped(f"{self._where}: connection lost: {_reason(e)}") from e


def _connection_budget() -> int:
    """Connections this process can hold open: see `SshApi.connection_budget`."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        wanted = 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)
        if wanted > soft:
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
                soft = wanted
    in_use = 32  # a guess at what a CLI process holds, where neither listing exists
    for listing in ("/proc/self/fd", "/dev/fd"):  # Linux, macOS
        with contextlib.suppress(OSError):
            in_use = len(os.listdir(listing))
            break
    return max(1, (soft - in_use - _FD_RESERVE) // _FDS_PER_CONNECTION)


def _reason(e: BaseException) -> str:
    if isinstance(e, asyncio.TimeoutError):
        return "timed out"
    if isinstance(e, asyncssh.Error):
        return e.reason or type(e).__name__
    if isinstance(e, OSError) and e.errno:  # asyncio's "Connect call failed (...)" says less
        return os.strerror(e.errno)
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return str(e) or type(e).__name__
