"""A thin reverse proxy in front of fake-gcs-server, for the emulated workers.

fake-gcs-server checks no token. The workers reach Cloud Storage through this proxy
(their TPUCTL_STORAGE_URL), which checks a VM's token as Google's front end does (its
scopes, then its service account's permissions, iam.py) and passes everything else on
unchanged. The laptop's clients still reach fake-gcs-server directly: the laptop's
caller has no token the emulator minted, so a proxy would only slow it down.

Bodies stream both ways in blocks of BLOCK bytes (a checkpoint of gigabytes is never
held in memory), one thread per connection, and one kept-alive upstream connection per
thread.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

from tpuctl import apis
from tpuctl.emulator import iam

BLOCK = 1 << 20
_HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "host",
    "expect",
}
# (method, path pattern) -> the permission a call needs (Cloud Storage's IAM reference)
_RULES: list[tuple[str, re.Pattern[str], str]] = [
    (m, re.compile(p), perm)
    for m, p, perm in (
        ("POST", r"^/upload/storage/v1/b/[^/]+/o$", "storage.objects.create"),
        ("PUT", r"^/upload/storage/v1/b/[^/]+/o$", "storage.objects.create"),
        ("POST", r"^/storage/v1/b/[^/]+/o/.+/(copyTo|rewriteTo)/", "storage.objects.create"),
        ("POST", r"^/storage/v1/b/[^/]+/o/.+/compose$", "storage.objects.create"),
        ("GET", r"^/storage/v1/b/[^/]+/o$", "storage.objects.list"),
        ("GET", r"^/(download/)?storage/v1/b/[^/]+/o/.+", "storage.objects.get"),
        ("DELETE", r"^/storage/v1/b/[^/]+/o/.+", "storage.objects.delete"),
        ("PATCH", r"^/storage/v1/b/[^/]+/o/.+", "storage.objects.update"),
        ("PUT", r"^/storage/v1/b/[^/]+/o/.+", "storage.objects.update"),
        ("GET", r"^/storage/v1/b/[^/]+$", "storage.buckets.get"),
        ("GET", r"^/storage/v1/b$", "storage.buckets.list"),
        ("POST", r"^/storage/v1/b$", "storage.buckets.create"),
        ("DELETE", r"^/storage/v1/b/[^/]+$", "storage.buckets.delete"),
    )
]


def permission(method: str, path: str) -> str | None:
    """The IAM permission a Cloud Storage JSON API call needs (None: not one we know)."""
    path = unquote(path)
    for m, pattern, perm in _RULES:
        if m == method and pattern.search(path):
            return perm
    return None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: StorageProxy

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def _refuse(self, payload: dict[str, Any]) -> None:
        self._drain()
        data = json.dumps(payload).encode()
        self.send_response(payload["error"]["code"])
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _drain(self) -> None:
        """Read the request body we will not pass on, so the connection stays usable."""
        for _ in self._body():
            pass

    def _body(self) -> Any:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return
                yield self.rfile.read(size)
                self.rfile.readline()
        left = int(self.headers.get("Content-Length") or 0)
        while left > 0:
            data = self.rfile.read(min(BLOCK, left))
            if not data:
                return
            left -= len(data)
            yield data

    def _check(self) -> dict[str, Any] | None:
        """The error body for a VM's token that may not make this call, else None."""
        backend = self.server.backend
        principal = backend.principal(self.headers.get("Authorization"))
        if principal is None:
            return None  # the caller's: fake-gcs-server answers as it does
        perm = permission(self.command, urlsplit(self.path).path)
        write = self.command != "GET"
        if not iam.scope_allows(principal.scopes, apis.STORAGE, write):
            return iam.storage_error(iam.STORAGE_SCOPE_ERROR)
        if perm and backend.storage_denied(principal, perm):
            return iam.storage_denied(principal.account, perm)
        return None

    def _handle(self) -> None:
        refusal = self._check()
        if refusal is not None:
            self._refuse(refusal)
            return
        try:
            self._forward()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _upstream(self) -> http.client.HTTPConnection:
        local = self.server.local
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = http.client.HTTPConnection(self.server.target, timeout=300)
            local.conn = conn
        return conn

    def _forward(self) -> None:
        chunked = self.headers.get("Transfer-Encoding", "").lower() == "chunked"
        for attempt in (0, 1):  # a kept-alive upstream connection may have been closed
            conn = self._upstream()
            try:
                conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                conn.putheader("Host", self.server.target)
                for name, value in self.headers.items():
                    if name.lower() not in _HOP:
                        conn.putheader(name, value)
                if chunked:
                    conn.putheader("Transfer-Encoding", "chunked")
                conn.endheaders()
                break
            except OSError:
                conn.close()
                self.server.local.conn = None
                if attempt:
                    raise
        for data in self._body():
            conn.send(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
        if chunked:
            conn.send(b"0\r\n\r\n")
        try:
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException):
            conn.close()
            self.server.local.conn = None
            raise
        self.send_response(resp.status, resp.reason)
        length = resp.getheader("Content-Length")
        upstream = f"http://{self.server.target}"
        for name, value in resp.getheaders():
            if name.lower() == "location" and value.startswith(upstream):
                value = self.server.url + value[len(upstream) :]  # a resumable session's
            if name.lower() not in _HOP:
                self.send_header(name, value)
        if length is None and self.command != "HEAD" and resp.status not in (204, 304):
            self.send_header("Connection", "close")  # the end of the body is the close
            self.close_connection = True
        self.end_headers()
        while data := resp.read(BLOCK):
            self.wfile.write(data)
        if resp.will_close:
            conn.close()
            self.server.local.conn = None

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _handle


class StorageProxy(ThreadingHTTPServer):
    """The proxy on host:port (0: any free one) in front of `target` (host:port of
    fake-gcs-server)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, host: str, target: str, backend: Any, port: int = 0) -> None:
        self.target, self.backend = target, backend
        self.local = threading.local()
        self._thread: threading.Thread | None = None
        self.host = host
        super().__init__((host, port), _Handler)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> StorageProxy:
        self._thread = threading.Thread(
            target=self.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="tpuctl-storage-proxy",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        if self._thread is not None:
            with contextlib.suppress(RuntimeError):
                self._thread.join(timeout=5)
