"""Whole files to and from Cloud Storage, streamed: a 20 GB checkpoint needs no 20 GB
of memory. Standard library only, Python 3.8+, like every module of the agent.

- Downloads: one GET streams the object into a temporary file beside the target. When
  the reply says the object is larger than `slice_size`, the same GET goes on with the
  first slice while the other slices come as ranged GETs (`Range: bytes=a-b`, pinned to
  the generation the first reply named), written with `os.pwrite` into the preallocated
  file. A slice that breaks is asked again from the byte where it broke (jittered
  back-off, `attempts` failures in a row without progress end it); the file is never
  started over. The result is checked against the object's MD5 (`x-goog-hash`, or the
  listing's `md5Hash`) and a sha256 when the caller knows one, and only then renamed
  into place (`os.replace`), so a target is whole or absent.
- Uploads: files up to MULTIPART_LIMIT go in one multipart request; larger ones by a
  resumable session in chunks of `chunk_size` (a multiple of 256 KiB), each streamed
  from disk. After a failed chunk the session is asked what it holds (`Content-Range:
  bytes */SIZE`, answered by 308 and `Range: bytes=0-N`) and the upload goes on from
  there; a session that is gone (404, 410) is started anew.
- Many files share one pool of `threads` threads (the slices of a large file and the
  small files alike), so 5,000 small files are `threads` requests at a time.
- Memory: a thread holds at most net.BLOCK (1 MiB) of a body at a time, so a pool of
  8 threads stays within ~10 MB whatever the file sizes (tests/agent/test_streams.py
  measures the peak RSS).

fake-gcs-server (the emulator) differs from Cloud Storage in one way this module meets:
a status query (`bytes */SIZE`) makes it *finish* the upload with the bytes it has
instead of answering 308. The finished object then has the wrong size, which is checked
after every upload, and the upload starts over in a new session: the real protocol,
with a guard that costs nothing against Cloud Storage.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlencode

from .downloads import BROKEN, Download
from .net import RETRIED, Body, HttpError, Json, backoff
from .storage import Storage

SLICE = 32 << 20  # a ranged GET of a large object
# A resumable upload's request: a multiple of 256 KiB (the API). Few and large, as Google
# advises (gcloud sends a file of known size in one request); 1 GiB bounds what a server
# that drops a broken request's bytes (fake-gcs-server) makes the agent send again.
CHUNK = 1 << 30
QUANTUM = 256 << 10
MULTIPART_LIMIT = 8 << 20  # larger files go by a resumable upload
THREADS = 8
ATTEMPTS = 8  # failures in a row, without progress, before a transfer gives up


class Pool:
    """Tasks on `threads` threads, which may add more tasks; `wait()` returns when all are
    done and raises the first error (after the others finished)."""

    def __init__(self, threads: int = THREADS) -> None:
        self._executor = ThreadPoolExecutor(max_workers=threads)
        self._pending, self._cond = 0, threading.Condition()
        self.errors: list[BaseException] = []

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        with self._cond:
            self._pending += 1
        self._executor.submit(self._run, fn, args)

    def _run(self, fn: Callable[..., Any], args: Any) -> None:
        try:
            fn(*args)
        except BaseException as e:  # noqa: BLE001 - handed to wait()
            with self._cond:
                self.errors.append(e)
        finally:
            with self._cond:
                self._pending -= 1
                if not self._pending:
                    self._cond.notify_all()

    def wait(self) -> None:
        with self._cond:
            while self._pending:
                self._cond.wait()
        self._executor.shutdown()
        if self.errors:
            raise self.errors[0]


class Transfers:
    """Downloads and uploads of whole files, many at once on one Pool.

    with Transfers(storage) as t:
        t.download(name, target, md5=...)
        t.upload(name, path, then=callback)
    # leaving the block waits for all and raises the first error
    """

    def __init__(
        self,
        storage: Storage,
        threads: int = THREADS,
        slice_size: int = SLICE,
        chunk_size: int = CHUNK,
        multipart_limit: int = MULTIPART_LIMIT,
        attempts: int = ATTEMPTS,
    ) -> None:
        if chunk_size % QUANTUM or chunk_size <= 0:
            raise ValueError(f"chunk_size must be a multiple of {QUANTUM}")
        self.storage, self.pool = storage, Pool(threads)
        self.slice_size, self.chunk_size = slice_size, chunk_size
        self.multipart_limit, self.attempts = multipart_limit, attempts

    def __enter__(self) -> Transfers:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.wait()

    def wait(self) -> None:
        self.pool.wait()

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        """Any task on the same threads (hashing a file before deciding to upload it)."""
        self.pool.submit(fn, *args)

    def download(
        self,
        name: str,
        target: Path,
        sha256: str | None = None,
        md5: str | None = None,
        generation: int | None = None,
        then: Callable[[], Any] | None = None,
    ) -> None:
        """Queue a download of object `name` into `target`."""
        item = Download(self, name, target, sha256, md5, generation, then)
        self.pool.submit(item.first)

    def upload(
        self,
        name: str,
        path: Path,
        content_type: str = "application/octet-stream",
        then: Callable[[Json], Any] | None = None,
    ) -> None:
        """Queue an upload of `path` as object `name`; `then(object)` runs after it."""
        self.pool.submit(self.upload_now, name, path, content_type, then)

    def upload_now(
        self,
        name: str,
        path: Path,
        content_type: str = "application/octet-stream",
        then: Callable[[Json], Any] | None = None,
    ) -> Json:
        """Upload in this thread: multipart when small, else resumable in chunks."""
        size = path.stat().st_size
        if size <= self.multipart_limit:
            obj = self.storage.write(name, path, content_type)
        else:
            obj = self._resumable(name, path, size, content_type)
        if then is not None:
            then(obj)
        return obj

    # -- resumable uploads -------------------------------------------------------------
    def _resumable(self, name: str, path: Path, size: int, content_type: str) -> Json:
        for _session in range(3):
            query = urlencode({"uploadType": "resumable", "name": name})
            meta = json.dumps({"name": name, "contentType": content_type}).encode()
            started = self.storage.http(
                "POST",
                f"{self.storage.uploads_url}?{query}",
                meta,
                **{
                    "Content-Type": "application/json; charset=UTF-8",
                    "X-Upload-Content-Type": content_type,
                    "X-Upload-Content-Length": str(size),
                },
            )
            obj = self._send_chunks(started[1]["location"], path, size, content_type)
            if obj is not None and int(obj.get("size", -1)) == size:
                return obj
            # None: the session is gone; a wrong size: fake-gcs-server finished it early
        raise HttpError(0, f"gs://{self.storage.bucket}/{name}: the resumable upload failed")

    def _send_chunks(self, url: str, path: Path, size: int, content_type: str) -> Json | None:
        """The object once the session holds every byte, or None when the session is gone."""
        offset, failures = 0, 0
        while True:
            end = min(offset + self.chunk_size, size)
            headers = self.storage.token.headers(
                **{
                    "Content-Type": content_type,
                    "Content-Range": f"bytes {offset}-{end - 1}/{size}"
                    if end > offset
                    else f"bytes */{size}",
                }
            )
            try:
                with self.storage.send(
                    "PUT", url, Body((path, offset, end - offset)), headers, 600
                ) as reply:
                    status, head, data = reply.status, reply.headers, reply.read()
            except BROKEN as e:
                status, head, data = 0, {}, str(e).encode()
            if status in (200, 201):
                return dict(json.loads(data))
            if status == 308:
                persisted = _persisted(head)
                # no progress counts as a failure, or a stuck session would loop forever
                failures = 0 if persisted > offset else failures + 1
                offset = persisted
                if failures >= self.attempts:
                    raise HttpError(308, f"PUT {url}: the session takes no more bytes")
                continue
            if status in (404, 410):
                return None
            if status and status not in RETRIED:
                raise HttpError(status, data[:500].decode(errors="replace"))
            failures += 1
            if failures >= self.attempts:
                raise HttpError(status, f"PUT {url}: {data[:500].decode(errors='replace')}")
            time.sleep(backoff(failures - 1))
            done = self._status(url, size)
            if done is None or isinstance(done, dict):
                return done
            offset = done

    def _status(self, url: str, size: int) -> Any:
        """Ask the session what it holds: an offset to go on from, the object when it is
        complete, or None when it is gone."""
        headers = {"Content-Range": f"bytes */{size}"}
        try:
            status, head, data = self.storage.http("PUT", url, b"", **headers)
        except HttpError as e:
            if e.status in (404, 410):
                return None
            raise
        return _persisted(head) if status == 308 else dict(json.loads(data))


def _persisted(head: dict[str, str]) -> int:
    """The offset after the bytes a session holds (308's `Range: bytes=0-N`; none: 0)."""
    value = head.get("range", "")
    return int(value.rsplit("-", 1)[1]) + 1 if value else 0
