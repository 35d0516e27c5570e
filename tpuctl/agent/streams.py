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
- Memory: a thread holds at most common.BLOCK (1 MiB) of a body at a time, so a pool of
  8 threads stays within ~10 MB whatever the file sizes (tests/agent/test_streams.py
  measures the peak RSS).

fake-gcs-server (the emulator) differs from Cloud Storage in one way this module meets:
a status query (`bytes */SIZE`) makes it *finish* the upload with the bytes it has
instead of answering 308. The finished object then has the wrong size, which is checked
after every upload, and the upload starts over in a new session: the real protocol,
with a guard that costs nothing against Cloud Storage.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.client
import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlencode

from .common import BLOCK, RETRIED, Body, HttpError, Json, Reply, Storage, backoff

SLICE = 32 << 20  # a ranged GET of a large object
# A resumable upload's request: a multiple of 256 KiB (the API). Few and large, as Google
# advises (gcloud sends a file of known size in one request); 1 GiB bounds what a server
# that drops a broken request's bytes (fake-gcs-server) makes the agent send again.
CHUNK = 1 << 30
QUANTUM = 256 << 10
MULTIPART_LIMIT = 8 << 20  # larger files go by a resumable upload
THREADS = 8
ATTEMPTS = 8  # failures in a row, without progress, before a transfer gives up
TMP_SUFFIX = ".tpuctl-tmp"
# what a broken connection raises: OSError (resets, timeouts) or http.client's own
BROKEN = (OSError, http.client.HTTPException)


def temporary(target: Path) -> Path:
    """Where a download is written before it is renamed into place."""
    return target.with_name(f".{target.name}{TMP_SUFFIX}")


def md5_base64(digest: Any) -> str:
    """An MD5 as Cloud Storage writes it."""
    return base64.b64encode(digest.digest()).decode()


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
        item = _Download(self, name, target, sha256, md5, generation, then)
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
                "POST", f"{self.storage.uploads_url}?{query}", meta,
                **{"Content-Type": "application/json; charset=UTF-8",
                   "X-Upload-Content-Type": content_type,
                   "X-Upload-Content-Length": str(size)},
            )  # fmt: skip
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
            headers = self.storage.token.headers(**{
                "Content-Type": content_type,
                "Content-Range": f"bytes {offset}-{end - 1}/{size}" if end > offset
                else f"bytes */{size}",
            })  # fmt: skip
            try:
                with self.storage.send("PUT", url, Body((path, offset, end - offset)),
                                       headers, 600) as reply:  # fmt: skip
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


class _Download:
    """One object into one file: the first GET, then its slices, each a pool task; the
    task that ends last checks the file and renames it (or removes it on failure)."""

    def __init__(
        self,
        transfers: Transfers,
        name: str,
        target: Path,
        sha256: str | None,
        md5: str | None,
        generation: int | None,
        then: Callable[[], Any] | None,
    ) -> None:
        self.t, self.storage, self.name, self.target = transfers, transfers.storage, name, target
        self.sha256, self.md5, self.generation, self.then = sha256, md5, generation, then
        self.tmp = temporary(target)
        self.fd = -1
        self.size: int | None = None
        self.digests: dict[str, Any] = {}  # the checks this file gets: md5, sha256
        self.inline = False  # hashed as it streams (one stream), else slice by slice
        self.hashed = 0  # bytes hashed, from the start, when written in slices
        self.ready: set[int] = set()  # the slices written (their first byte)
        self.hashing = threading.Lock()
        self.left, self.lock = 1, threading.Lock()  # tasks of this file not yet ended
        self.error: BaseException | None = None

    def first(self) -> None:
        try:
            self.target.parent.mkdir(parents=True, exist_ok=True)
            self.fd = os.open(str(self.tmp), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o666)
            reply = self._get(0, None)
            self.generation = int(reply.headers.get("x-goog-generation") or 0) or None
            for part in reply.headers.get("x-goog-hash", "").split(","):
                kind, _, value = part.strip().partition("=")
                if kind == "md5" and value:
                    self.md5 = value  # the served generation's, whatever the listing said
            if self.md5:
                self.digests["md5"] = hashlib.md5()
            if self.sha256:
                self.digests["sha256"] = hashlib.sha256()
            length = reply.headers.get("content-length")
            self.size = int(length) if length is not None else None
            if self.size is not None and self.size > self.t.slice_size:
                self._preallocate(self.size)
                with self.lock:
                    self.left += (self.size - 1) // self.t.slice_size
                for start in range(self.t.slice_size, self.size, self.t.slice_size):
                    end = min(start + self.t.slice_size, self.size) - 1
                    self.t.pool.submit(self._slice, start, end)
                self._fill(0, self.t.slice_size - 1, reply)
                self._hash_ready(0)
            else:
                self.inline = True
                self._fill(0, None, reply)
        except BaseException as e:
            self._done(e)
            raise
        self._done(None)

    def _slice(self, start: int, end: int) -> None:
        try:
            with self.lock:
                if self.error is not None:
                    return  # the file failed already: no more requests for it
            self._fill(start, end, None)
            self._hash_ready(start)
        except BaseException as e:
            self._done(e)
            raise
        self._done(None)

    def _preallocate(self, size: int) -> None:
        if hasattr(os, "posix_fallocate"):
            try:
                os.posix_fallocate(self.fd, 0, size)  # ENOSPC now, not at 19 GB
                return
            except OSError as e:
                if e.errno not in (95, 22):  # EOPNOTSUPP, EINVAL: a file system without it
                    raise
        os.ftruncate(self.fd, size)

    def _get(self, start: int, end: int | None) -> Reply:
        """A GET of bytes start..end (end None: to the object's end), retried; the reply's
        body is still to be read."""
        headers = {}
        if start or end is not None:
            headers["Range"] = f"bytes={start}-{'' if end is None else end}"
        url = self.storage.media_url(self.name, self.generation)
        for attempt in range(self.t.attempts):
            try:
                reply = self.storage.send("GET", url, None, self.storage.token.headers(**headers))
            except BROKEN as e:
                message = str(e)
            else:
                if reply.status in (200, 206):
                    return reply
                with reply:
                    try:
                        message = reply.read(500).decode(errors="replace")
                    except BROKEN as e:
                        message = str(e)
                if reply.status not in RETRIED:
                    raise HttpError(
                        reply.status, f"gs://{self.storage.bucket}/{self.name}: {message}"
                    )
            if attempt < self.t.attempts - 1:
                time.sleep(backoff(attempt))
        raise HttpError(0, f"GET gs://{self.storage.bucket}/{self.name}: {message}")

    def _fill(self, start: int, end: int | None, reply: Reply | None) -> None:
        """Write bytes start..end (None: to the end of the stream) at their offsets,
        asking again from the byte where a stream broke."""
        position, failures = start, 0
        while end is None or position <= end:
            if reply is None:
                reply = self._get(position, end)
            try:
                with reply:
                    while end is None or position <= end:
                        want = BLOCK if end is None else min(BLOCK, end + 1 - position)
                        data = reply.read(want)
                        if not data:
                            break
                        os.pwrite(self.fd, data, position)
                        if self.inline:
                            for digest in self.digests.values():
                                digest.update(data)
                        position += len(data)
                        failures = 0
                if end is None or position > end:
                    if end is None and self.size is not None and position < self.size:
                        raise http.client.IncompleteRead(b"", self.size - position)
                    break
                raise http.client.IncompleteRead(b"", end + 1 - position)
            except BROKEN as e:
                failures += 1
                if failures >= self.t.attempts:
                    raise HttpError(0, f"GET gs://{self.storage.bucket}/{self.name}: {e}") from None
                time.sleep(backoff(failures - 1))
                reply = None
        if end is None:
            self.size = position

    def _done(self, error: BaseException | None) -> None:
        with self.lock:
            self.left -= 1
            if error is not None and self.error is None:
                self.error = error
            last = self.left == 0
        if not last:
            return
        try:
            if self.error is None:
                self._check()
        except BaseException:
            self._discard()
            raise
        if self.error is not None:
            self._discard()
            return
        os.close(self.fd)
        self.fd = -1
        os.replace(str(self.tmp), str(self.target))
        if self.then is not None:
            self.then()

    def _hash_ready(self, start: int) -> None:
        """Slice `start` is written: hash the slices that are done, in order, from where
        hashing stopped (MD5 is sequential), while other threads go on downloading. A
        thread that finds another one hashing leaves it the work; _check does the rest."""
        with self.lock:
            self.ready.add(start)
        if not self.hashing.acquire(blocking=False):
            return
        try:
            while True:
                with self.lock:
                    if self.hashed not in self.ready:
                        return
                self._hash_from(self.hashed, self.hashed + self.t.slice_size)

        finally:
            self.hashing.release()

    def _hash_from(self, offset: int, end: int | None) -> None:
        """Hash the file's bytes from `offset` (where hashing stopped) to `end` or EOF."""
        while end is None or offset < end:
            want = BLOCK if end is None else min(BLOCK, end - offset)
            data = os.pread(self.fd, want, offset)
            if not data:
                break
            for digest in self.digests.values():
                digest.update(data)
            offset += len(data)
            self.hashed = offset

    def _check(self) -> None:
        if not self.inline:
            with self.hashing:
                self._hash_from(self.hashed, None)
        where = f"gs://{self.storage.bucket}/{self.name}"
        if self.md5 and md5_base64(self.digests["md5"]) != self.md5:
            raise HttpError(0, f"{where}: the download does not match the object's MD5")
        if self.sha256 and self.digests["sha256"].hexdigest() != self.sha256:
            raise HttpError(0, f"{where} does not match its sha256")

    def _discard(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        with contextlib.suppress(FileNotFoundError):
            os.unlink(str(self.tmp))
