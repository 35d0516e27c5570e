"""What every program on the TPU VM needs: HTTP with retries, the metadata server, the
service account's token, who this worker is, Cloud Storage's JSON API, `alive(pid)`.

Standard library only, Python 3.8+: TPU VM images have only the system Python. It never
imports tpuctl; agent.py, idle.py and follow.py import it as a sibling, on the laptop
(tpuctl.agent) and inside the bundle on the VM alike (bundle.py). The endpoints are
read once, at import, from TPUCTL_METADATA_URL, TPUCTL_STORAGE_URL, TPUCTL_TPU_URL and
TPUCTL_MONITORING_URL, Google's by default (docs/runner-internals.md, "Endpoints").
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Callable, Dict
from urllib.parse import quote, urlencode

_GOOGLE_METADATA = "http://metadata.google.internal/computeMetadata/v1"
METADATA_URL = os.environ.get("TPUCTL_METADATA_URL", _GOOGLE_METADATA).rstrip("/")
STORAGE_URL = os.environ.get("TPUCTL_STORAGE_URL", "https://storage.googleapis.com").rstrip("/")
TPU_URL = os.environ.get("TPUCTL_TPU_URL", "https://tpu.googleapis.com").rstrip("/")
MONITORING_URL = os.environ.get(
    "TPUCTL_MONITORING_URL", "https://monitoring.googleapis.com"
).rstrip("/")  # Cloud Monitoring's REST API: the idle watchdog reads idle_duration there
BLOCK = 1 << 20  # bytes a thread holds at once while streaming a body to or from disk
RETRIED = (429, 500, 502, 503, 504)
# The bundle's file name on a VM is BUNDLE_PREFIX + <sha256[:12]> + BUNDLE_SUFFIX
# (bundle.py); idle.py knows an agent's process by it.
BUNDLE_PREFIX, BUNDLE_SUFFIX = "tpuctl-agent-", ".pyz"
Json = Dict[str, Any]


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class Body:
    """A request body sent from memory and from parts of files, never read whole: `pieces`
    are bytes or (path, offset, length). Each `reader()` starts from the beginning again
    (a retried request sends it anew) and yields at most BLOCK bytes a read."""

    def __init__(self, *pieces: Any) -> None:
        self.pieces = pieces
        self.size = sum(len(p) if isinstance(p, bytes) else int(p[2]) for p in pieces)

    def reader(self) -> _BodyReader:
        return _BodyReader(self.pieces)


class _BodyReader:
    def __init__(self, pieces: Any) -> None:
        self._pieces, self._left = list(pieces), 0
        self._file: Any = None

    def read(self, size: int = -1) -> bytes:
        while True:
            if self._file is not None:
                data = self._file.read(min(self._left, BLOCK))
                self._left -= len(data)
                if data and self._left > 0:
                    return data
                self._file.close()
                self._file = None
                if data:
                    return data
                if self._left:
                    raise OSError("a file sent in a request body got shorter")
            if not self._pieces:
                return b""
            piece = self._pieces.pop(0)
            if isinstance(piece, bytes):
                if piece:
                    return piece
                continue
            path, offset, self._left = piece
            self._file = open(str(path), "rb")  # noqa: SIM115 - closed when read out
            self._file.seek(offset)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


class Reply:
    """An HTTP response whose body is read as it arrives (`read(n)`) or whole (`body()`).
    `headers` have lower-case names."""

    def __init__(self, status: int, headers: Any, stream: Any) -> None:
        self.status, self.stream = status, stream
        self.headers = {k.lower(): v for k, v in headers.items()}

    def read(self, size: int = -1) -> bytes:
        # read(-1) of a chunked http.client response would return the chunks' framing
        return bytes(self.stream.read() if size < 0 else self.stream.read(size))

    def body(self) -> bytes:
        with self:
            return self.read()

    def close(self) -> None:
        self.stream.close()

    def __enter__(self) -> Reply:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # a 3xx is an answer (a resumable upload's 308), not a detour


_OPENER = urllib.request.build_opener(_NoRedirect)


def send(
    method: str, url: str, data: Any = None, headers: dict[str, str] | None = None,
    timeout: float = 60,
) -> Reply:  # fmt: skip
    """One HTTP request, no retries: the seam every call goes through (tests wrap it to
    inject faults). `data` is bytes, a Path (streamed from disk) or a Body. Every status
    comes back as a Reply; network errors raise OSError."""
    headers = dict(headers or {})
    body: Any = data
    if isinstance(data, Path):
        body = open(str(data), "rb")  # noqa: SIM115 - closed below
    elif isinstance(data, Body):
        body = data.reader()
        headers["Content-Length"] = str(data.size)
    try:
        req = urllib.request.Request(url, data=body, method=method, headers=headers)
        try:
            resp = _OPENER.open(req, timeout=timeout)
        except urllib.error.HTTPError as e:
            return Reply(e.code, e.headers or {}, e)
        return Reply(resp.status, resp.headers, resp)
    finally:
        if body is not data:
            body.close()


Send = Callable[..., Reply]


def backoff(attempt: int) -> float:
    """Seconds to wait before try `attempt + 1`: jittered, doubling, at most 10."""
    return min(10.0, 0.25 * 2**attempt) * random.uniform(0.5, 1.0)


def http(
    method: str,
    url: str,
    data: Any = None,
    headers: dict[str, str] | None = None,
    attempts: int = 8,
    timeout: float = 60,
    sender: Send | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One HTTP call, retried with jittered back-off on 429, 5xx and network errors.
    `data` is bytes, a Path or a Body (sent anew for each attempt). Returns (status,
    headers with lower-case names, body) for statuses below 400 (a 308 included)."""
    for attempt in range(attempts):
        try:
            reply = (sender or send)(method, url, data, headers or {}, timeout)
            with reply:
                if reply.status < 400:
                    return reply.status, reply.headers, reply.read()
                if reply.status not in RETRIED or attempt == attempts - 1:
                    message = reply.read(500).decode(errors="replace")
                    raise HttpError(reply.status, message)
        except OSError as e:  # URLError, resets, timeouts
            if attempt == attempts - 1:
                raise HttpError(0, f"{method} {url}: {e}") from None
        time.sleep(backoff(attempt))
    raise AssertionError("unreachable")


# -- the metadata server ---------------------------------------------------------------
def metadata(path: str) -> str:
    return http("GET", f"{METADATA_URL}/{path}", headers={"Metadata-Flavor": "Google"})[2].decode()


class Token:
    """The service account's access token, cached until a minute before it expires."""

    def __init__(self) -> None:
        self._value, self._expires, self._lock = "", 0.0, threading.Lock()

    def headers(self, **extra: str) -> dict[str, str]:
        with self._lock:
            if time.time() >= self._expires:
                data = json.loads(metadata("instance/service-accounts/default/token"))
                self._value = data["access_token"]
                self._expires = time.time() + float(data.get("expires_in", 300)) - 60
            return dict(extra, Authorization="Bearer " + self._value)


def identity() -> Json:
    """Who this VM is: project, zone, node id, worker number and worker count."""
    env = {}
    for line in metadata("instance/attributes/tpu-env").splitlines():
        key, _, value = line.partition(":")
        env[key.strip()] = value.strip().strip("'\"")
    endpoints = metadata("instance/attributes/worker-network-endpoints").split(",")
    return {
        "project": metadata("project/project-id"),
        "zone": metadata("instance/zone").rsplit("/", 1)[-1],
        "node": env.get("NODE_ID", ""),
        "worker": int(metadata("instance/attributes/agent-worker-number")),
        "workers": len([e for e in endpoints if e]) or 1,
    }


# -- the Cloud TPU API -----------------------------------------------------------------
def tpu(token: Token, method: str, path: str, body: bytes | None = None) -> bytes:
    """One call about this node (`path` after /v2/); fewer and shorter tries than the
    agent's uploads, so that a watchdog's or guard's tick under faults ends soon and
    tries again on the next one."""
    headers = token.headers(**({"Content-Type": "application/json"} if body else {}))
    return http(method, f"{TPU_URL}/v2/{path}", body, headers, attempts=5, timeout=30)[2]


def number(value: Any) -> float | None:
    """A label's number, or None."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


# -- Cloud Storage (JSON API) ---------------------------------------------------------
class Storage:
    """One bucket through the JSON API. Every request goes through `sender` (`send` by
    default): tests pass a wrapper that injects faults. Streaming whole files to and from
    disk is streams.py's."""

    def __init__(
        self, token: Token, bucket: str, sender: Send | None = None, url: str | None = None
    ) -> None:
        self.token, self.bucket, self.sender = token, bucket, sender or send
        base, name = (url or STORAGE_URL).rstrip("/"), quote(bucket, safe="")
        self.objects_url = f"{base}/storage/v1/b/{name}/o"
        self.uploads_url = f"{base}/upload/storage/v1/b/{name}/o"

    def http(self, method: str, url: str, data: Any = None, **headers: str) -> Any:
        """`http` with the token and this bucket's sender."""
        return http(method, url, data, self.token.headers(**headers), sender=self.send)

    def send(self, *args: Any, **kwargs: Any) -> Reply:
        return self.sender(*args, **kwargs)

    def media_url(self, name: str, generation: int | None = None) -> str:
        query = {"alt": "media", **({"generation": str(generation)} if generation else {})}
        return f"{self.objects_url}/{quote(name, safe='')}?{urlencode(query)}"

    def read(self, name: str) -> tuple[bytes, int]:
        """An object's content (for small objects: it is held in memory) and generation."""
        _, head, data = self.http("GET", self.media_url(name))
        return data, int(head.get("x-goog-generation", 0))

    def read_json(self, name: str) -> tuple[Json | None, int]:
        """(value, generation), or (None, 0) when absent."""
        try:
            data, generation = self.read(name)
        except HttpError as e:
            if e.status == 404:
                return None, 0
            raise
        return json.loads(data), generation

    def update_json(self, name: str, change: Any) -> None:
        """Rewrite a JSON object as `change(value)` with a conditional write, again on
        412 (someone else wrote it between the read and the write)."""
        for _ in range(5):
            value, generation = self.read_json(name)
            try:
                self.write_json(name, change(value or {}), generation)
                return
            except HttpError as e:
                if e.status != 412:
                    raise

    def write(
        self,
        name: str,
        data: bytes | Path,
        content_type: str = "application/octet-stream",
        if_generation_match: int | None = None,
    ) -> Json:
        """A multipart upload: the kind that honours ifGenerationMatch everywhere. A Path
        is streamed from disk."""
        sep = "tpuctl-" + uuid.uuid4().hex
        meta = json.dumps({"name": name, "contentType": content_type})
        head = (
            f"--{sep}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n{meta}\r\n"
            f"--{sep}\r\nContent-Type: {content_type}\r\n\r\n"
        ).encode()
        content = data if isinstance(data, bytes) else (data, 0, data.stat().st_size)
        body = Body(head, content, f"\r\n--{sep}--\r\n".encode())
        query = {"uploadType": "multipart"}
        if if_generation_match is not None:
            query["ifGenerationMatch"] = str(if_generation_match)
        url = f"{self.uploads_url}?{urlencode(query)}"
        reply = self.http(
            "POST", url, body, **{"Content-Type": "multipart/related; boundary=" + sep}
        )
        return dict(json.loads(reply[2]))

    def write_json(self, name: str, value: Any, if_generation_match: int | None = None) -> int:
        data = json.dumps(value, indent=1, sort_keys=True).encode()
        return int(self.write(name, data, "application/json", if_generation_match)["generation"])

    def objects(self, prefix: str) -> list[Json]:
        items: list[Json] = []
        query = {"prefix": prefix}
        while True:
            page = json.loads(self.http("GET", f"{self.objects_url}?{urlencode(query)}")[2])
            items.extend(page.get("items") or [])
            if not page.get("nextPageToken"):
                return items
            query["pageToken"] = page["nextPageToken"]


# -- heartbeats -----------------------------------------------------------------------
FINAL = ("SUCCEEDED", "FAILED", "CANCELLED", "LOST", "PREEMPTED")


class Beats:
    """Which workers stopped beating: a worker whose status is not final and whose
    `heartbeat` has not changed for `deadline` seconds (a worker with no status counts
    from the first look). Measured on this machine's monotonic clock, from when a change
    was *seen*: the clocks of two machines are never compared. The client (the runner's
    watch) and worker 0's agent (watching its peers) both use it."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.seen: dict[int, Any] = {}  # worker -> (heartbeat, monotonic time first seen)

    def lost(
        self, statuses: dict[int, Json], workers: Any, deadline: float | None = None
    ) -> list[int]:
        now, limit = time.monotonic(), self.deadline if deadline is None else deadline
        lost: list[int] = []
        for worker in workers:
            status = statuses.get(worker) or {}
            if status.get("state") in FINAL:
                continue
            beat = status.get("heartbeat")
            last = self.seen.get(worker)
            if last is None or last[0] != beat:
                self.seen[worker] = (beat, now)
            elif now - last[1] > limit:
                lost.append(worker)
        return lost

    def silent_for(self, worker: int) -> float:
        last = self.seen.get(worker)
        return time.monotonic() - last[1] if last else 0.0


# -- processes ---------------------------------------------------------------------------
def alive(pid: int) -> bool:
    """Does process `pid` exist (also when it belongs to another user)?"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
