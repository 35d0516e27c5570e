"""A thin reverse proxy in front of fake-gcs-server: the emulator's Cloud Storage endpoint.

Every client reaches Cloud Storage through it: the laptop's (the status's
`storage_endpoint`) and the workers' (their TPUCTL_STORAGE_URL); fake-gcs-server itself is
on a network only the proxy reaches (private_net.py). It does what fake-gcs-server does not:
- it refuses what a web page can send (core/browsers.py), and passes on no CORS header;
- it checks permissions as Google's front end does: a VM's token's scopes, then its
  service account's permissions (iam/accounts.py); the caller's (a call without a token the
  emulator minted) against the permissions the config denies it (iam/access.py);
- it keeps each bucket's lifecycle configuration, which fake-gcs-server drops
  (lifecycle.py): checked and kept on a bucket's insert, patch or update, added
  back to every bucket resource returned, dropped with the bucket;
- it keeps the project that owns each bucket: the `project` a bucket's insert names
  (Cloud Storage's buckets.insert takes it as a query parameter), shown as the bucket's
  `projectNumber` as Cloud Storage shows it (fake-gcs-server has no projects), so a
  bucket name taken by another project is seen as such;
- it keeps each bucket's location as its insert gave it, uppercase as Cloud Storage
  shows it (fake-gcs-server shows one location for every bucket).
Everything else passes on unchanged.

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
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tpuctl.emulator.core import browsers
from tpuctl.emulator.core.errors import ApiError
from tpuctl.emulator.core.http_server import QuietServer
from tpuctl.emulator.iam import accounts as iam
from tpuctl.emulator.offerings import apis
from tpuctl.emulator.storage import lifecycle as bucket_lifecycle
from tpuctl.emulator.storage import preconditions
from tpuctl.emulator.tpu.models import project_number

BLOCK = 1 << 20
# A bucket is where its insert's `location` says, kept uppercase ("us-west4" is shown as
# US-WEST4); without one it is in the US multi-region
# (https://cloud.google.com/storage/docs/json_api/v1/buckets/insert, `location`;
# https://cloud.google.com/storage/docs/locations).
_DEFAULT_LOCATION = "US"
_MULTI_REGIONS = {"US", "EU", "ASIA"}
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
        ("PATCH", r"^/storage/v1/b/[^/]+$", "storage.buckets.update"),
        ("PUT", r"^/storage/v1/b/[^/]+$", "storage.buckets.update"),
    )
]


# a bucket resource, or the collection of them: the calls whose bodies carry `lifecycle`
_BUCKET = re.compile(r"^/storage/v1/b(?:/(?P<bucket>[^/]+))?$")
_OBJECT = re.compile(r"^/storage/v1/b/[^/]+/o/[^/]+$")
# (method, a bucket named) -> the JSON API's method, as the control plane counts calls
_BUCKET_VERBS = {
    ("POST", False): "insert",
    ("GET", False): "list",
    ("GET", True): "get",
    ("PATCH", True): "patch",
    ("PUT", True): "update",
    ("DELETE", True): "delete",
}


def _passed(header: str) -> bool:
    """An answer's header passed on: not hop-by-hop, not CORS (fake-gcs-server allows `*`)."""
    return header.lower() not in _HOP and not header.lower().startswith("access-control-")


def permission(method: str, path: str) -> str | None:
    """The IAM permission a Cloud Storage JSON API call needs (None: not one we know)."""
    path = unquote(path)
    for m, pattern, perm in _RULES:
        if m == method and pattern.search(path):
            return perm
    return None


def _show(item: dict[str, Any], meta: dict[str, Any]) -> None:
    """A bucket resource as Cloud Storage shows it: with what the emulator keeps."""
    if meta.get("projectNumber"):
        item["projectNumber"] = str(meta["projectNumber"])
    if meta.get("location"):  # fake-gcs-server shows one location for every bucket
        item["location"] = meta["location"]
        item["locationType"] = "multi-region" if meta["location"] in _MULTI_REGIONS else "region"
    if meta.get("lifecycle"):
        item["lifecycle"] = meta["lifecycle"]
    else:
        item.pop("lifecycle", None)
    if "metageneration" in item:
        item["metageneration"] = str(meta.get("metageneration") or item["metageneration"])


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: StorageProxy

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def _refuse(self, payload: dict[str, Any], drained: bool = False) -> None:
        if not drained:
            self._drain()
        self._answer(payload["error"]["code"], "", [], json.dumps(payload).encode())

    def _answer(
        self, status: int, reason: str, headers: list[tuple[str, str]], data: bytes
    ) -> None:
        """A whole answer, held in memory (small: an error, or bucket metadata)."""
        self.send_response(status, reason or None)
        kind = "application/json; charset=UTF-8"
        for name, value in headers:
            if name.lower() == "content-type":
                kind = value
            elif _passed(name) and name.lower() != "content-length":
                self.send_header(name, value)
        self.send_header("Content-Type", kind)
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
        """The error body for a call its caller may not make (a VM's token, or the
        caller without one), else None."""
        backend = self.server.backend
        principal = backend.principal(self.headers.get("Authorization"))
        perm = permission(self.command, urlsplit(self.path).path)
        if principal is None:  # the caller's (iam/access.py: the permissions it lacks)
            caller = backend.caller_storage_denied(perm) if perm else None
            return iam.storage_denied(caller, perm) if caller and perm else None
        write = self.command != "GET"
        if not iam.scope_allows(principal.scopes, apis.STORAGE, write):
            return iam.storage_error(iam.STORAGE_SCOPE_ERROR)
        if perm and backend.storage_denied(principal, perm):
            return iam.storage_denied(principal.account, perm)
        return None

    def _handle(self) -> None:
        refused = browsers.refusal(self.headers, self.server.host)
        if refused is not None:  # a web page's request (core/browsers.py): not read, not done
            self.close_connection = True
            self._answer(refused[0], "", [], json.dumps(ApiError(*refused).to_dict()).encode())
            return
        refusal = self._check()
        if refusal is not None:
            self._refuse(refusal)
            return
        url = urlsplit(self.path)
        bucket = _BUCKET.match(url.path)
        try:
            if bucket and (self.command, bucket.group("bucket") is not None) in _BUCKET_VERBS:
                self._bucket_call(bucket.group("bucket"), parse_qs(url.query))
            elif self.command == "DELETE" and _OBJECT.match(url.path):
                self._object_delete(url.path, parse_qs(url.query))
            else:
                self._forward()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _object_delete(self, path: str, query: dict[str, list[str]]) -> None:
        """An object's delete, with its ifGenerationMatch checked here: fake-gcs-server
        deletes whatever generation is there, where Cloud Storage answers 412
        conditionNotMet (https://cloud.google.com/storage/docs/request-preconditions)."""
        wanted = query.get("ifGenerationMatch", [""])[-1]
        with self.server.bucket_lock:  # the check and the delete at once (for deletes)
            if wanted:
                conn = self.server.storage.connection(60)
                try:
                    conn.request("GET", path)
                    resp = conn.getresponse()
                    data = resp.read()
                finally:
                    conn.close()
                if resp.status == 200 and str(json.loads(data).get("generation")) != wanted:
                    self._refuse(preconditions.FAILED)
                    return
            self._forward()

    def _bucket_call(self, name: str | None, query: dict[str, list[str]]) -> None:
        """A bucket's insert, get, patch, update or delete, or the list of buckets: passed
        on without `lifecycle`, and with the metageneration kept here (fake-gcs-server
        leaves it at 1 and ignores preconditions on it), as Cloud Storage does: checked
        against ifMetagenerationMatch / NotMatch, one more on every patch or update."""
        body = b"".join(self._body())
        verb = _BUCKET_VERBS[self.command, name is not None]
        # counted as /requests shows the API's calls
        self.server.backend.requests.count(f"{self.command} storage.buckets.{verb}")
        given, lifecycle = False, None
        location = _DEFAULT_LOCATION
        if self.command in ("POST", "PATCH", "PUT") and body:
            try:
                doc = json.loads(body)
            except ValueError:
                doc = None  # fake-gcs-server answers it
            if isinstance(doc, dict) and doc.get("location"):
                location = str(doc["location"]).upper()
            if isinstance(doc, dict) and "lifecycle" in doc:
                given = True
                try:
                    lifecycle = bucket_lifecycle.validate(doc.pop("lifecycle"))
                except bucket_lifecycle.Invalid:
                    self._refuse(bucket_lifecycle.invalid_body(), drained=True)
                    return
                body = json.dumps(doc).encode()
        backend = self.server.backend
        with self.server.bucket_lock:  # a check, the call and the new metageneration at once
            meta = backend.bucket_meta(unquote(name)) if name else {}
            generation = int(meta.get("metageneration") or 1)
            if name and not preconditions.metageneration_holds(query, generation):
                self._refuse(preconditions.FAILED, drained=True)
                return
            status, reason, headers, data = self._exchange(body)
            if not 200 <= status < 300:
                self._answer(status, reason, headers, data)
                return
            try:
                resource = json.loads(data) if data.strip() else {}
            except ValueError:
                resource = {}
            if not isinstance(resource, dict):
                resource = {}
            bucket = unquote(name) if name else str(resource.get("name", "")) or None
            if bucket and self.command in ("POST", "DELETE"):  # a new bucket, or none
                owner = query.get("project", [""])[-1]
                meta = (
                    {
                        "lifecycle": lifecycle,
                        "projectNumber": project_number(owner) if owner else "",
                        "location": location,
                    }
                    if self.command == "POST"
                    else {}
                )
                backend.set_bucket_meta(bucket, meta)
            elif bucket and self.command in ("PATCH", "PUT"):
                if given or self.command == "PUT":  # an update replaces every field
                    meta["lifecycle"] = lifecycle
                meta["metageneration"] = generation + 1
                backend.set_bucket_meta(bucket, meta)
        if resource:
            items = resource.get("items") if bucket is None else [resource]
            for item in items or []:
                _show(item, backend.bucket_meta(str(item.get("name", ""))))
            data = json.dumps(resource).encode()
        self._answer(status, reason, headers, data)

    def _upstream(self) -> http.client.HTTPConnection:
        local = self.server.local
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = self.server.storage.connection(300)
            local.conn = conn
        return conn

    def _open(self, length: int | None = None) -> http.client.HTTPConnection:
        """The upstream connection with this request's line and headers sent (`length`:
        the body's, replacing the request's own and its encoding)."""
        chunked = length is None and self.headers.get("Transfer-Encoding", "").lower() == "chunked"
        drop = _HOP | ({"content-length", "accept-encoding"} if length is not None else set())
        for attempt in (0, 1):  # a kept-alive upstream connection may have been closed
            conn = self._upstream()
            try:
                conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                conn.putheader("Host", self.server.target)
                for name, value in self.headers.items():
                    if name.lower() not in drop:
                        conn.putheader(name, value)
                if chunked:
                    conn.putheader("Transfer-Encoding", "chunked")
                if length is not None:
                    conn.putheader("Content-Length", str(length))
                conn.endheaders()
                return conn
            except OSError:
                conn.close()
                self.server.local.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def _response(self, conn: http.client.HTTPConnection) -> http.client.HTTPResponse:
        try:
            return conn.getresponse()
        except (OSError, http.client.HTTPException):
            conn.close()
            self.server.local.conn = None
            raise

    def _exchange(self, body: bytes) -> tuple[int, str, list[tuple[str, str]], bytes]:
        """Send this request with `body`; the whole answer (status, reason, headers, body)."""
        conn = self._open(len(body))
        if body:
            conn.send(body)
        resp = self._response(conn)
        data = resp.read()
        if resp.will_close:
            conn.close()
            self.server.local.conn = None
        return resp.status, resp.reason, resp.getheaders(), data

    def _forward(self) -> None:
        chunked = self.headers.get("Transfer-Encoding", "").lower() == "chunked"
        conn = self._open()
        for data in self._body():
            conn.send(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
        if chunked:
            conn.send(b"0\r\n\r\n")
        resp = self._response(conn)
        self.send_response(resp.status, resp.reason)
        length = resp.getheader("Content-Length")
        upstream = f"http://{self.server.target}"
        # An object's metadata names its links (mediaLink, selfLink) at fake-gcs-server's
        # own address, which only this proxy reaches: they name the proxy instead, as
        # Cloud Storage's name storage.googleapis.com (a client downloads a listed blob
        # by its mediaLink).
        metadata = None
        media = "alt=media" in self.path or self.path.startswith("/download/")
        if (
            "json" in (resp.getheader("Content-Type") or "")
            and not media
            and self.command != "HEAD"
        ):
            metadata = resp.read().replace(upstream.encode(), self.server.url.encode())
        for name, value in resp.getheaders():
            if name.lower() == "location" and value.startswith(upstream):
                value = self.server.url + value[len(upstream) :]  # a resumable session's
            if metadata is not None and name.lower() in ("content-length", "transfer-encoding"):
                continue
            if _passed(name):
                self.send_header(name, value)
        if metadata is not None:
            self.send_header("Content-Length", str(len(metadata)))
        elif length is None and self.command != "HEAD" and resp.status not in (204, 304):
            self.send_header("Connection", "close")  # the end of the body is the close
            self.close_connection = True
        self.end_headers()
        if metadata is not None:
            self.wfile.write(metadata)
        while data := resp.read(BLOCK):
            self.wfile.write(data)
        if resp.will_close:
            conn.close()
            self.server.local.conn = None

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _handle


class StorageProxy(QuietServer):
    """The proxy on host:port (0: any free one) in front of `storage` (fake-gcs-server:
    server.StorageServer, its `target` and its `connection`)."""

    def __init__(self, host: str, storage: Any, backend: Any, port: int = 0) -> None:
        self.storage, self.target, self.backend = storage, storage.target, backend
        self.local = threading.local()
        self.bucket_lock = threading.Lock()
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
