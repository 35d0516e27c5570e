"""The emulator's HTTP front: the handler of every call (the APIs on the paths `urls`
routes, Compute's batch, the control plane, the metadata servers), refusing what a web
page sends, answering in Google's error shape, and the HTTP server that tracks its
connections. `server.py` runs it.

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
from operator import attrgetter
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tpuctl.emulator.compute import batch
from tpuctl.emulator.control import urls as control_urls
from tpuctl.emulator.control.client import CONTROL_PREFIX
from tpuctl.emulator.core import api_call, browsers, errors
from tpuctl.emulator.core.errors import ApiError
from tpuctl.emulator.core.http_server import QuietServer
from tpuctl.emulator.metadata import server as metadata
from tpuctl.emulator.services import Backend
from tpuctl.emulator.tpu import enums


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

    def _send(self, status: int, payload: Any, end: bytes = b"") -> None:
        data = json.dumps(payload).encode() + end
        self._send_bytes(status, "application/json; charset=UTF-8", data)

    def _send_bytes(self, status: int, content_type: str, data: bytes) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the caller is gone (e.g. a worker's process killed by the node's deletion)

    def _send_metadata(self, path: str, query: dict[str, str]) -> None:
        try:
            status, content_type, data, extra = metadata.respond(
                self.server.backend, path, query, self.headers
            )
        except Exception as exc:  # a bug here must still answer
            traceback.print_exc()
            status, content_type, data = 500, "text/plain", f"emulator bug: {exc!r}".encode()
            extra = {}
        self.send_response(status)
        self.send_header("Metadata-Flavor", "Google")
        for name, value in extra.items():
            self.send_header(name, value)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        try:
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the guest is gone (a long `wait_for_change` of a worker torn down)

    def _handle(self) -> None:
        backend = self.server.backend
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        refused = browsers.refusal(self.headers, self.server.own_host)
        if refused is not None:  # a web page's request: nothing of it is read or done
            self.close_connection = True
            self._send(refused[0], ApiError(*refused).to_dict())
            return
        if url.path.startswith(metadata.PREFIX):
            self._send_metadata(url.path, query)
            return
        try:
            if url.path.startswith(batch.PREFIX):  # Compute's batch: gcloud's many at once
                content_type, data = batch.respond(
                    backend,
                    self.headers.get("Content-Type", ""),
                    self._raw(),
                    self.headers.get("Authorization"),
                )
                self._send_bytes(200, content_type, data)
                return
            body = self._body()
            if url.path.startswith(CONTROL_PREFIX):
                name, spec, render = control_urls.control_route(self.command, url.path)
                args = control_urls.control_arguments(spec, {**query, **body})
                method = attrgetter(name)(backend)
                if render is None:
                    self._send(200, method(*args), b"\n")  # a shell's prompt on its own line
                    return
                with backend.lock:  # rendered as the call left the state
                    answer = render(method(*args))
                self._send(200, answer, b"\n")
                return
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
            if enums.wants_numbers(query):  # what Google's REST clients ask for
                result = enums.as_numbers(self.command, url.path, result)
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
