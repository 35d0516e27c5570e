"""The registry's port: Artifact Registry's Docker API (`distribution.py`) over HTTP/1.1,
beside the emulator's REST port. It refuses what a web page sends, as every port of the
emulator does (core/browsers.py), and streams request bodies to files and blobs from
them: no blob is held whole in memory."""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tpuctl.emulator.core import browsers
from tpuctl.emulator.core.http_server import QuietServer
from tpuctl.emulator.registry import repositories
from tpuctl.emulator.registry.blobs import Blobs
from tpuctl.emulator.registry.distribution import Call, Distribution, RegistryError, Reply

_CHUNK = 1 << 20


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "tpuctl-emulator-registry"
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        if self.server.verbose:
            sys.stderr.write(f"registry {self.address_string()} {format % args}\n")

    def _body(self) -> Iterator[bytes]:
        """The request's body in chunks (chunked or Content-Length), read once."""
        self._read = True
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return
                left = size
                while left:
                    chunk = self.rfile.read(min(left, _CHUNK))
                    if not chunk:
                        return
                    left -= len(chunk)
                    yield chunk
                self.rfile.readline()
        left = int(self.headers.get("Content-Length") or 0)
        while left > 0:
            chunk = self.rfile.read(min(left, _CHUNK))
            if not chunk:
                return
            left -= len(chunk)
            yield chunk

    def _handle(self) -> None:
        self._read = False
        refused = browsers.refusal(self.headers, self.server.own_host)
        if refused is not None:  # a web page's request: nothing of it is read or done
            self.close_connection = True
            self._send(RegistryError("DENIED", refused[2]).reply())
            return
        url = urlsplit(self.path)
        call = Call(
            self.command,
            url.path,
            {k: v[-1] for k, v in parse_qs(url.query).items()},
            {k.lower(): v for k, v in self.headers.items()},
            self._body,
        )
        try:
            reply = self.server.distribution.handle(call)
        except Exception as exc:  # a bug here must still answer, in the registry's shape
            import traceback

            traceback.print_exc()
            reply = RegistryError("UNKNOWN", f"emulator bug: {exc!r}").reply()
            reply.status = 500
        has_body = bool(self.headers.get("Content-Length", "0") != "0") or bool(
            self.headers.get("Transfer-Encoding")
        )
        if has_body and (not self._read or reply.status >= 400):
            self.close_connection = True  # an unread body: the connection cannot carry on
        self._send(reply)

    def _send(self, reply: Reply) -> None:
        body = reply.body
        length = body.stat().st_size if isinstance(body, Path) else len(body)
        try:
            self.send_response(reply.status)
            self.send_header("Docker-Distribution-API-Version", "registry/2.0")
            for name, value in reply.headers.items():
                if name != "Content-Length":
                    self.send_header(name, value)
            self.send_header("Content-Length", reply.headers.get("Content-Length", str(length)))
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            if isinstance(body, Path):
                with open(body, "rb") as source:
                    for block in iter(lambda: source.read(_CHUNK), b""):
                        self.wfile.write(block)
            elif self.command != "HEAD":
                self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    do_GET = do_HEAD = do_POST = do_PATCH = do_PUT = do_DELETE = _handle


class _Server(QuietServer):
    def __init__(self, address: tuple[str, int], distribution: Distribution, verbose: bool):
        self.distribution, self.verbose, self.own_host = distribution, verbose, address[0]
        super().__init__(address, _Handler)


class RegistryServer:
    """Artifact Registry's Docker API on host:port (0: a free one), over the backend's
    state (repositories, images) and the blobs in `state_dir`/registry."""

    def __init__(self, backend: Any, host: str, port: int, state_dir: Path | None, verbose=False):
        self._backend = backend
        self.blobs = Blobs(state_dir)
        self.distribution = Distribution(backend.apply, backend.principal, self.blobs)
        self._httpd = _Server((host, port), self.distribution, verbose)
        self._host = host
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def address(self) -> str:
        return f"{self._host}:{self.port}"

    def images(self) -> dict[str, Any]:
        """Every image pushed: name, tags, manifests (`GET /_emulator/v1/registry/images`)."""
        return dict(self._backend.apply(repositories.images))

    def start(self) -> RegistryServer:
        self.distribution.address = self.address
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="tpuctl-emulator-registry",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        with contextlib.suppress(OSError):
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.blobs.close()
