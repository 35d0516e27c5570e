"""The HTTP layer: maps Cloud TPU v2 REST paths and the control plane onto the backend.

Standard library only. HTTP/1.1 keep-alive with TCP_NODELAY, so a call costs about a
millisecond; one daemon thread per connection.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tpuctl.emulator import catalog_api, errors, metadata
from tpuctl.emulator.backend import Backend
from tpuctl.emulator.control import CONTROL_PREFIX
from tpuctl.emulator.errors import ApiError
from tpuctl.emulator.storage import StorageServer

Handler = Callable[..., Any]
_P = r"/v2/projects/(?P<project>[^/]+)/locations"
_Z = _P + r"/(?P<zone>[^/:]+)"
_N = _Z + r"/nodes/(?P<node>[^/:]+)"
_O = _Z + r"/operations/(?P<op>[^/:]+)"
_QR = _Z + r"/queuedResources"
# gcloud's `compute tpus locations` and `accelerator-types` groups still call v1 for these
_P1 = r"/v[12]/projects/(?P<project>[^/]+)/locations"
_Z1 = _P1 + r"/(?P<zone>[^/:]+)"
_PZ = ("project", "zone")
# the Cloud Quotas API (cloudquotas.googleapis.com) subset: quota infos of a service
_Q = r"/v1/projects/(?P<project>[^/]+)/locations/global/services/(?P<service>[^/]+)/quotaInfos"

# (HTTP method, path, verb counted in /requests, backend method name or catalog function,
#  arguments: path groups by name, "?param" from the query, "paging", "body")
API_ROUTES: list[tuple[str, str, str, str | Handler, tuple[str, ...]]] = [
    ("GET", _P1, "locations.list", catalog_api.list_locations, ("project", "paging")),
    ("GET", _Z1, "locations.get", catalog_api.get_location, _PZ),
    ("GET", _Z + "/nodes", "list", "list_nodes", (*_PZ, "paging")),
    ("POST", _Z + "/nodes", "create", "create_node", (*_PZ, "?nodeId", "body")),
    ("GET", _N, "get", "get_node", (*_PZ, "node")),
    ("DELETE", _N, "delete", "delete_node", (*_PZ, "node")),
    ("PATCH", _N, "patch", "update_node", (*_PZ, "node", "?updateMask", "body")),
    ("POST", _N + ":stop", "stop", "stop_node", (*_PZ, "node")),
    ("POST", _N + ":start", "start", "start_node", (*_PZ, "node")),
    ("POST", _N + ":getGuestAttributes", "getGuestAttributes", "get_guest_attributes",
     (*_PZ, "node", "body")),
    ("GET", _QR, "queuedResources.list", "list_queued_resources", (*_PZ, "paging")),
    ("POST", _QR, "queuedResources.create", "create_queued_resource",
     (*_PZ, "?queuedResourceId", "body")),
    ("GET", _QR + "/(?P<qr>[^/:]+)", "queuedResources.get", "get_queued_resource",
     (*_PZ, "qr")),
    ("DELETE", _QR + "/(?P<qr>[^/:]+)", "queuedResources.delete", "delete_queued_resource",
     (*_PZ, "qr", "?force")),
    ("GET", _Z + "/operations", "operations.list", "list_operations", (*_PZ, "paging")),
    ("GET", _O, "operations.get", "get_operation", (*_PZ, "op")),
    ("DELETE", _O, "operations.delete", "delete_operation", (*_PZ, "op")),
    ("POST", _O + ":cancel", "operations.cancel", "cancel_operation", (*_PZ, "op")),
    ("GET", _Z1 + "/acceleratorTypes", "acceleratorTypes.list",
     catalog_api.list_accelerator_types, (*_PZ, "paging")),
    ("GET", _Z1 + "/acceleratorTypes/(?P<type>[^/:]+)", "acceleratorTypes.get",
     catalog_api.get_accelerator_type, (*_PZ, "type")),
    ("GET", _Z + "/runtimeVersions", "runtimeVersions.list",
     catalog_api.list_runtime_versions, (*_PZ, "paging")),
    ("GET", _Z + "/runtimeVersions/(?P<version>[^/:]+)", "runtimeVersions.get",
     catalog_api.get_runtime_version, (*_PZ, "version")),
    ("GET", _Q, "quotaInfos.list", "list_quota_infos", ("project", "service", "paging")),
    ("GET", _Q + "/(?P<quota>[^/]+)", "quotaInfos.get", "get_quota_info",
     ("project", "service", "quota")),
]  # fmt: skip

# control plane: (HTTP method, path under CONTROL_PREFIX) -> backend method, body keys
CONTROL_ROUTES: dict[tuple[str, str], tuple[str, tuple[str, ...]]] = {
    ("GET", "status"): ("status", ()),
    ("GET", "config"): ("config", ()),
    ("POST", "config"): ("update_config", ("body",)),
    ("POST", "reset"): ("reset", ()),
    ("GET", "faults"): ("faults_config", ()),
    ("POST", "faults"): ("set_faults", ("body",)),
    ("POST", "advance"): ("advance", ("node?",)),
    ("GET", "nodes"): ("all_nodes", ()),
    ("GET", "requests"): ("request_counts", ()),
    ("POST", "guest-attributes"): ("set_guest_attributes", ("node", "worker", "items")),
    ("POST", "preempt"): ("preempt", ("node",)),
    ("GET", "queued"): ("all_queued", ()),
    ("POST", "queued/fail"): ("queued_control", ("=fail", "name", "message?")),
    ("POST", "queued/suspend"): ("queued_control", ("=suspend", "name")),
    ("POST", "queued/provision"): ("queued_control", ("=provision", "name")),
}


def _arguments(
    spec: tuple[str, ...], match: dict[str, str], query: dict[str, str], body: dict[str, Any]
) -> list[Any]:
    args: list[Any] = []
    for item in spec:
        if item == "body":
            args.append(body)
        elif item == "paging":
            try:
                args.append(int(query.get("pageSize") or 0))
            except ValueError:
                raise errors.invalid_argument("pageSize must be a number.", "page_size") from None
            args.append(query.get("pageToken", ""))
        elif item.startswith("?"):
            args.append(query.get(item[1:], ""))
        else:
            args.append(match[item])
    return args


def _control_arguments(spec: tuple[str, ...], body: dict[str, Any]) -> list[Any]:
    args: list[Any] = []
    for item in spec:
        if item == "body":
            args.append(body)
        elif item.startswith("="):  # a constant
            args.append(item[1:])
        elif item.endswith("?"):
            args.append(body.get(item[:-1]))
        elif item not in body:
            raise errors.invalid_argument(f"the control call needs '{item}'")
        else:
            args.append(body[item])
    return args


_COMPILED = [(m, re.compile(path + "$"), verb, fn, spec) for m, path, verb, fn, spec in API_ROUTES]


def _route(method: str, path: str) -> tuple[str, str | Handler, tuple[str, ...], dict[str, str]]:
    for route_method, pattern, verb, fn, spec in _COMPILED:
        match = pattern.match(path)
        if match and route_method == method:
            return verb, fn, spec, {k: unquote(v) for k, v in match.groupdict().items()}
    raise errors.no_route(method, path)


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "tpuctl-emulator"
    server: _HTTPServer

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

    def _body(self) -> dict[str, Any]:
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
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=UTF-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the caller is gone (e.g. a worker's process killed by the node's deletion)

    def _send_metadata(self, path: str, query: dict[str, str]) -> None:
        try:
            status, content_type, data = metadata.respond(
                self.server.backend, path, query, self.headers
            )
        except Exception as exc:  # a bug here must still answer
            traceback.print_exc()
            status, content_type, data = 500, "text/plain", f"emulator bug: {exc!r}".encode()
        self.send_response(status)
        self.send_header("Metadata-Flavor", "Google")
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self) -> None:
        backend = self.server.backend
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        if url.path.startswith(metadata.PREFIX):
            self._send_metadata(url.path, query)
            return
        try:
            body = self._body()
            if url.path.startswith(CONTROL_PREFIX):
                key = (self.command, url.path[len(CONTROL_PREFIX) :])
                if key not in CONTROL_ROUTES:
                    raise errors.no_route(self.command, url.path)
                name, spec = CONTROL_ROUTES[key]
                self._send(200, getattr(backend, name)(*_control_arguments(spec, body)))
                return
            verb, fn, spec, match = _route(self.command, url.path)
            backend.count(f"{self.command} {verb}")
            delay, fault, after, quota = backend.draw_fault(self.path)
            if delay:
                time.sleep(delay)
            if fault is not None and not after:
                raise errors.injected(fault, match.get("project", ""), match.get("zone"), quota)
            target = getattr(backend, fn) if isinstance(fn, str) else fn
            result = target(*_arguments(spec, match, query, body))
            if fault is not None:
                raise errors.injected(fault, match.get("project", ""), match.get("zone"), quota)
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


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], backend: Backend, verbose: bool) -> None:
        self.backend = backend
        self.verbose = verbose
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


class EmulatorServer:
    """The emulator on host:port (port 0: any free one), served from a background thread."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 8470,
        state_dir: Path | str | None = None,
        verbose: bool = False,
        storage: bool = True,
        ssh: bool = True,
        ssh_port: int | None = None,
    ) -> None:
        self.backend = Backend(state_dir)
        self._host, self._port, self._verbose = host, port, verbose
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        # Cloud Storage (fake-gcs-server, a child process): objects kept beside the nodes
        self.storage: StorageServer | None = None
        if storage:
            root = Path(state_dir) / "storage" if state_dir else None
            self.storage = StorageServer(host, 0, root)
        self._ssh_wanted, self._ssh_port = ssh, ssh_port  # ssh_port None: a free one
        self.ssh: Any = None  # the workers' SSH servers (ssh_workers.SshWorkers) once started

    @property
    def address(self) -> str:
        """`host:port`, the value for TPUCTL_EMULATOR_HOST."""
        port = self._httpd.server_address[1] if self._httpd else self._port
        return f"{self._host}:{port}"

    def start(self) -> EmulatorServer:
        """Bind (raising OSError if the port is taken), start Cloud Storage (raising
        StorageError if it cannot), and serve in a daemon thread."""
        self._httpd = _HTTPServer((self._host, self._port), self.backend, self._verbose)
        if self.storage is not None:
            try:
                self.storage.start()
            except Exception:
                self._httpd.server_close()
                self._httpd = None
                raise
            self.backend.storage_endpoint = self.storage.url
            self.backend.clear_storage = self.storage.clear
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},  # how long stop() may wait for the loop
            name="tpuctl-emulator",
            daemon=True,
        )
        self._thread.start()
        self.backend.endpoint = self.address
        if self._ssh_wanted:
            from tpuctl.emulator.ssh_workers import SshWorkers

            try:
                self.ssh = SshWorkers(self.backend, self._ssh_port).start()
            except BaseException:
                self.stop()
                raise
        return self

    def stop(self) -> None:
        if self.ssh is not None:
            self.ssh.stop()
            self.ssh = None
        self.backend.close()
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.close_connections()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        if self.storage is not None:
            self.storage.stop()

    def __enter__(self) -> EmulatorServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
