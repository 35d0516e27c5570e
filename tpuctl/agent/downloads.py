"""One object into one file, streamed, in slices when it is large: streams.py's
downloads (the module docstring there says how). Standard library only, Python 3.8+."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.client
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable

from .net import BLOCK, RETRIED, HttpError, Mismatch, Reply, backoff

TMP_SUFFIX = ".tpuctl-tmp"
# what a broken connection raises: OSError (resets, timeouts) or http.client's own
BROKEN = (OSError, http.client.HTTPException)


def temporary(target: Path) -> Path:
    """Where a download is written before it is renamed into place."""
    return target.with_name(f".{target.name}{TMP_SUFFIX}")


def md5_base64(digest: Any) -> str:
    """An MD5 as Cloud Storage writes it."""
    return base64.b64encode(digest.digest()).decode()


class Download:
    """One object into one file: the first GET, then its slices, each a pool task; the
    task that ends last checks the file and renames it (or removes it on failure)."""

    def __init__(
        self,
        transfers: Any,  # streams.Transfers: its storage, pool, slice_size, attempts
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
            raise Mismatch(self.name, f"{where}: the download does not match the object's MD5")
        if self.sha256 and self.digests["sha256"].hexdigest() != self.sha256:
            raise Mismatch(self.name, f"{where} does not match its sha256")

    def _discard(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        with contextlib.suppress(FileNotFoundError):
            os.unlink(str(self.tmp))
