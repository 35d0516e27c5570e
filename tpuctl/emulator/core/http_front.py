"""The emulator's HTTP front: the handler of every call (the APIs on the paths `urls`
routes, and the paths answered whole, `services.PREFIXES`: Compute's batch, the control
plane, the metadata servers), refusing what a web page sends, answering in Google's
error shape, and the HTTP server that tracks its connections. `server.py` runs it.

Standard library only. HTTP/1.1 keep-alive with TCP_NODELAY, so a call costs about a
millisecond; one daemon thread per connection.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
import traceback
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tpuctl.emulator.core import api_call, browsers, errors
from tpuctl.emulator.core.errors import ApiError
from tpuctl.emulator.core.http_server import QuietServer
from tpuctl.emulator.core.service import Request, json_answer
from tpuctl.emulator.services import PREFIXES, Backend


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "tpuctl-emulator"
    server: HTTPServer

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.track(self.connection, False)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        if self.server.verbose:
            sys.stderr.write(f"{self.address_string()} {format % args}\n")

    def _raw(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            raw = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                chunk = self.rfile.read(size + 2)[:size]
                if size == 0:
                    break
                raw += chunk
        else:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        return raw

    def _body(self) -> dict[str, Any]:
        raw = self._raw()
        refused = browsers.body_refusal(self.headers, raw)
        if refused is not None:
            raise ApiError(*refused)
        if not raw.strip():
            return {}
        try:
            body = json.loads(raw)
        except ValueError as exc:
            raise errors.invalid_argument(f"Invalid JSON payload received. {exc}") from None
        if not isinstance(body, dict):
            raise errors.invalid_argument("Invalid JSON payload received. Expected an object.")
        return body

    def _send(self, status: int, payload: Any) -> None:
        self._answer(*json_answer(status, payload))

    def _answer(self, status: int, headers: list[tuple[str, str]], data: bytes) -> None:
        try:
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the caller is gone (e.g. a worker's process killed by the node's deletion)

    def _handle(self) -> None:
        backend = self.server.backend
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        refused = browsers.refusal(self.headers, self.server.own_host)
        if refused is not None:  # a web page's request: nothing of it is read or done
            self.close_connection = True
            self._send(refused[0], ApiError(*refused).to_dict())
            return
        try:
            for prefix in self.server.prefixes:
                if url.path.startswith(prefix.path):
                    request = Request(
                        self.command, url.path, query, self.headers, self._raw, self._body
                    )
                    self._answer(*prefix.respond(backend, request))
                    return
            body = self._body()
            result = api_call.call(
                backend,
                self.command,
                url.path,
                query,
                body,
                self.path,
                self.headers.get("Authorization"),
                {k.lower(): v for k, v in self.headers.items()},
            )
            for rewrite in self.server.rewrites:
                result = rewrite(self.command, url.path, query, result)
            self._send(200, result)
        except ApiError as exc:
            self._send(exc.http, exc.to_dict())
        except (BrokenPipeError, ConnectionResetError):
            # The caller went away before the answer (e.g. a worker's agent deleting its
            # own node: the node's processes end with it). Nobody to answer; not a bug.
            self.close_connection = True
        except Exception as exc:  # a bug here must still answer, and in Google's shape
            traceback.print_exc()
            self._send(500, ApiError(500, "INTERNAL", f"emulator bug: {exc!r}").to_dict())

    do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _handle


class HTTPServer(QuietServer):
    def __init__(self, address: tuple[str, int], backend: Backend, verbose: bool) -> None:
        self.backend = backend
        # the paths answered whole, the longest first: the metadata server's are under
        # the control plane's
        self.prefixes = sorted(PREFIXES, key=lambda prefix: -len(prefix.path))
        self.rewrites = [rewrite for service in backend.services for rewrite in service.rewrites]
        self.verbose = verbose
        self.own_host = address[0]
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(address, _RequestHandler)

    def track(self, conn: socket.socket, alive: bool) -> None:
        with self._connections_lock:
            if alive:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def close_connections(self) -> None:
        with self._connections_lock:
            for conn in self._connections:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
            self._connections.clear()
