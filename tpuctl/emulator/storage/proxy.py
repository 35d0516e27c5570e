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

One thread per connection; what passes on is relayed by relay.py (bodies streamed,
one kept-alive upstream connection per thread).
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tpuctl.emulator.core import browsers
from tpuctl.emulator.core.errors import ApiError
from tpuctl.emulator.iam import accounts as iam
from tpuctl.emulator.offerings import apis
from tpuctl.emulator.storage import lifecycle as bucket_lifecycle
from tpuctl.emulator.storage import preconditions
from tpuctl.emulator.storage.relay import Relay, Upstream
from tpuctl.emulator.tpu.models import project_number

# A bucket is where its insert's `location` says, kept uppercase ("us-west4" is shown as
# US-WEST4); without one it is in the US multi-region
# (https://cloud.google.com/storage/docs/json_api/v1/buckets/insert, `location`;
# https://cloud.google.com/storage/docs/locations).
_DEFAULT_LOCATION = "US"
_MULTI_REGIONS = {"US", "EU", "ASIA"}
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


class _Handler(Relay):
    server: StorageProxy

    def _refuse(self, payload: dict[str, Any], drained: bool = False) -> None:
        if not drained:
            self._drain()
        self._answer(payload["error"]["code"], "", [], json.dumps(payload).encode())

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

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _handle


class StorageProxy(Upstream):
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
