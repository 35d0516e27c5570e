"""What every program on the TPU VM needs: HTTP with retries, the metadata server, the
service account's token, who this worker is, Cloud Storage's JSON API, `alive(pid)`.

Standard library only, Python 3.8+: TPU VM images have only the system Python. It never
imports tpuctl; agent.py, idle.py and follow.py import it as a sibling, on the laptop
(tpuctl.agent) and inside the bundle on the VM alike (bundle.py). The endpoints are
read once, at import, from TPUCTL_METADATA_URL, TPUCTL_STORAGE_URL and TPUCTL_TPU_URL,
Google's by default (docs/runner-internals.md, "Endpoints").
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Dict
from urllib.parse import quote, urlencode

_GOOGLE_METADATA = "http://metadata.google.internal/computeMetadata/v1"
METADATA_URL = os.environ.get("TPUCTL_METADATA_URL", _GOOGLE_METADATA).rstrip("/")
STORAGE_URL = os.environ.get("TPUCTL_STORAGE_URL", "https://storage.googleapis.com").rstrip("/")
TPU_URL = os.environ.get("TPUCTL_TPU_URL", "https://tpu.googleapis.com").rstrip("/")
MULTIPART_LIMIT = 8 << 20  # larger files go by a resumable upload, streamed from disk
RETRIED = (429, 500, 502, 503, 504)
# The bundle's file name on a VM is BUNDLE_PREFIX + <sha256[:12]> + BUNDLE_SUFFIX
# (bundle.py); idle.py knows an agent's process by it.
BUNDLE_PREFIX, BUNDLE_SUFFIX = "tpuctl-agent-", ".pyz"
Json = Dict[str, Any]


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


def http(
    method: str,
    url: str,
    data: Any = None,
    headers: dict[str, str] | None = None,
    attempts: int = 8,
    timeout: float = 60,
) -> tuple[int, dict[str, str], bytes]:
    """One HTTP call, retried with jittered back-off on 429, 5xx and network errors.
    `data` is bytes, or a Path streamed from disk (reopened for each attempt).
    Returns (status, headers with lower-case names, body)."""
    for attempt in range(attempts):
        body = open(data, "rb") if isinstance(data, Path) else data  # noqa: SIM115
        try:
            req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                head = {k.lower(): v for k, v in resp.headers.items()}
                return resp.status, head, resp.read()
        except urllib.error.HTTPError as e:
            if e.code not in RETRIED or attempt == attempts - 1:
                raise HttpError(e.code, e.read()[:500].decode(errors="replace")) from None
        except OSError as e:  # URLError, resets, timeouts
            if attempt == attempts - 1:
                raise HttpError(0, f"{method} {url}: {e}") from None
        finally:
            if isinstance(data, Path) and body is not None:
                body.close()
        time.sleep(min(10.0, 0.25 * 2**attempt) * random.uniform(0.5, 1.0))
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
    def __init__(self, token: Token, bucket: str) -> None:
        self.token, self.bucket = token, bucket
        self._b = f"{STORAGE_URL}/storage/v1/b/{quote(bucket, safe='')}/o"
        self._up = f"{STORAGE_URL}/upload/storage/v1/b/{quote(bucket, safe='')}/o"

    def read(self, name: str) -> tuple[bytes, int]:
        """An object's content and generation."""
        url = f"{self._b}/{quote(name, safe='')}?alt=media"
        _, head, data = http("GET", url, headers=self.token.headers())
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
        data: bytes,
        content_type: str = "application/octet-stream",
        if_generation_match: int | None = None,
    ) -> Json:
        """A multipart upload: the kind that honours ifGenerationMatch everywhere."""
        sep = "tpuctl-" + uuid.uuid4().hex
        meta = json.dumps({"name": name, "contentType": content_type})
        body = (
            f"--{sep}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n{meta}\r\n"
            f"--{sep}\r\nContent-Type: {content_type}\r\n\r\n"
        ).encode()
        body += data + f"\r\n--{sep}--\r\n".encode()
        query = {"uploadType": "multipart"}
        if if_generation_match is not None:
            query["ifGenerationMatch"] = str(if_generation_match)
        headers = self.token.headers(**{"Content-Type": "multipart/related; boundary=" + sep})
        return dict(json.loads(http("POST", f"{self._up}?{urlencode(query)}", body, headers)[2]))

    def write_json(self, name: str, value: Any, if_generation_match: int | None = None) -> int:
        data = json.dumps(value, indent=1, sort_keys=True).encode()
        return int(self.write(name, data, "application/json", if_generation_match)["generation"])

    def upload_file(
        self, name: str, path: Path, content_type: str = "application/octet-stream"
    ) -> Any:
        size = path.stat().st_size
        if size <= MULTIPART_LIMIT:
            return self.write(name, path.read_bytes(), content_type)
        start = f"{self._up}?{urlencode({'uploadType': 'resumable', 'name': name})}"
        meta = json.dumps({"contentType": content_type}).encode()
        head = http("POST", start, meta, self.token.headers(**{"Content-Type": "application/json"}))
        put = self.token.headers(**{"Content-Length": str(size), "Content-Type": content_type})
        return http("PUT", head[1]["location"], path, put, timeout=600)

    def download(self, name: str, target: Path, sha256: str | None = None) -> None:
        """Download to a temporary file beside `target`, check the hash, then rename."""
        data = self.read(name)[0]
        if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
            raise HttpError(0, f"gs://{self.bucket}/{name} does not match its sha256")
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tpuctl-tmp")
        tmp.write_bytes(data)
        os.replace(str(tmp), str(target))

    def objects(self, prefix: str) -> list[Json]:
        items: list[Json] = []
        query = {"prefix": prefix}
        while True:
            page = json.loads(
                http("GET", f"{self._b}?{urlencode(query)}", headers=self.token.headers())[2]
            )
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
