"""Cloud Storage's JSON API, one bucket at a time: small objects read and written whole,
JSON objects rewritten under a generation precondition, listings. Streaming whole files
to and from disk is streams.py's. Reached at TPUCTL_STORAGE_URL (read once, at import),
Google's by default (contributing/runner-internals.md, "Endpoints").

Standard library only, Python 3.8+, like every module of the agent (bundle.py).
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from .metadata import Token
from .net import Body, HttpError, Json, Reply, Send, http, send

# bytes: the largest object read whole into memory (records, statuses, leases, requests;
# the client's bound too, cloud/storage.py's JSON_LIMIT); files are streamed (streams.py)
READ_LIMIT = 16 << 20
STORAGE_URL = os.environ.get("TPUCTL_STORAGE_URL", "https://storage.googleapis.com").rstrip("/")


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

    def read(self, name: str, limit: int = READ_LIMIT) -> tuple[bytes, int]:
        """A small object's content (held in memory) and generation; one longer than
        `limit` bytes raises TooLarge (a ValueError), having read at most `limit` + 1."""
        url, headers = self.media_url(name), self.token.headers()
        _, head, data = http("GET", url, None, headers, sender=self.send, limit=limit)
        return data, int(head.get("x-goog-generation", 0))

    def read_json(self, name: str, limit: int = READ_LIMIT) -> tuple[Json | None, int]:
        """(value, generation), or (None, 0) when absent; ValueError when it is not JSON
        or longer than `limit` bytes."""
        try:
            data, generation = self.read(name, limit)
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

    def delete(self, name: str, if_generation_match: int | None = None) -> bool:
        """Delete an object (only that generation, when given): False when it was gone
        or, with a generation, rewritten meanwhile."""
        query = {"ifGenerationMatch": str(if_generation_match)} if if_generation_match else {}
        url = f"{self.objects_url}/{quote(name, safe='')}"
        url += f"?{urlencode(query)}" if query else ""
        try:
            self.http("DELETE", url)
        except HttpError as e:
            if e.status in (404, 412):
                return False
            raise
        return True

    def objects(self, prefix: str) -> list[Json]:
        items: list[Json] = []
        query = {"prefix": prefix}
        while True:
            page = json.loads(self.http("GET", f"{self.objects_url}?{urlencode(query)}")[2])
            items.extend(page.get("items") or [])
            if not page.get("nextPageToken"):
                return items
            query["pageToken"] = page["nextPageToken"]
