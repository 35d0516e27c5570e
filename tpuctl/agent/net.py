"""HTTP for the agent: one request (`send`, the seam every call goes through), the
retrying call for small requests (`http`), request bodies streamed from files and replies
read as they arrive.

Standard library only, Python 3.8+, like every module of the agent (bundle.py).
"""

from __future__ import annotations

import random
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Dict

BLOCK = 1 << 20  # bytes a thread holds at once while streaming a body to or from disk
RETRIED = (429, 500, 502, 503, 504)
Json = Dict[str, Any]


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class Mismatch(HttpError):
    """A download whose content is not what was expected of object `name` (its MD5 or
    sha256): never retried, and, for code, a sign the bucket was tampered with."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(0, message)
        self.name = name


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


class TooLarge(ValueError):
    """A body longer than the reader allowed (another principal may write what is read:
    it is read in bounded memory)."""


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
    method: str,
    url: str,
    data: Any = None,
    headers: dict[str, str] | None = None,
    timeout: float = 60,
) -> Reply:
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
    limit: int | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One HTTP call, retried with jittered back-off on 429, 5xx and network errors.
    `data` is bytes, a Path or a Body (sent anew for each attempt). Returns (status,
    headers with lower-case names, body) for statuses below 400 (a 308 included). A body
    longer than `limit` bytes raises TooLarge, having read at most one byte more."""
    for attempt in range(attempts):
        try:
            reply = (sender or send)(method, url, data, headers or {}, timeout)
            with reply:
                if reply.status < 400:
                    body = reply.read() if limit is None else reply.read(limit + 1)
                    if limit is not None and len(body) > limit:
                        raise TooLarge(f"{method} {url}: more than {limit:,} bytes")
                    return reply.status, reply.headers, body
                if reply.status not in RETRIED or attempt == attempts - 1:
                    message = reply.read(500).decode(errors="replace")
                    raise HttpError(reply.status, message)
        except OSError as e:  # URLError, resets, timeouts
            if attempt == attempts - 1:
                raise HttpError(0, f"{method} {url}: {e}") from None
        time.sleep(backoff(attempt))
    raise AssertionError("unreachable")
