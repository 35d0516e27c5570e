"""The one way tpuctl reads an object of the bucket on the laptop (`Reads`, which
storage.Bucket is): its stored bytes, never decoded, never more than a bound however much
the server sends, and JSON parsed only when what it would parse into is bounded too.

The bucket is shared ground: whoever can write it (every job VM of a default project) can
put any bytes under any name, with any Content-Encoding. So an object stored encoded
(gzip) is refused, naming it: tpuctl never writes one, and decoding would turn a small
object into any size. Cloud Storage serves such an object compressed to a client that
accepts gzip, as the storage client does, and decompresses it only for one that does not
(https://cloud.google.com/storage/docs/transcoding). tests/cli/test_hostile_bucket.py
plants what a hostile co-writer may, and checks that nothing reads an object but here.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TypeVar

from google.api_core import exceptions as gx

from tpuctl.errors import UnreadableObjectError

if TYPE_CHECKING:
    from google.cloud import storage

T = TypeVar("T")
TIMEOUT = 60.0
READ_BLOCK = 1 << 20  # a log is read this much at a time (bounded memory, whatever its size)
# The largest record (status, lease, job record, receipt) tpuctl reads: its own are KiBs.
# A command's memory is bounded by what it reads: at most this many bytes, and what they
# parse into at most PARSE_BUDGET (about; `parse_cost`), so that no object of the bucket
# can make a command use more than a few tens of MB (bench/hostile.py measures it).
JSON_LIMIT = 1 << 20
PARSE_BUDGET = 16 << 20
CO_WRITER = "another principal with write access to the bucket may have written it"


class Reads:
    """The reads of a storage.Bucket: what it provides is declared here."""

    name: str
    received: int  # bytes of object content read so far
    _bucket: storage.Bucket
    _count: threading.Lock

    def _call(self, subject: str, fn: Callable[[], T]) -> T:
        raise NotImplementedError

    def _subject(self, path: str) -> str:
        raise NotImplementedError

    def read_bytes(self, path: str, limit: int | None = None) -> tuple[bytes, int]:
        """An object's content and generation; NotFoundError when absent. No more than
        `limit` bytes are ever received: a larger object is an error naming it (the
        bucket is shared: an object another principal made may be of any size); by
        default JSON_LIMIT."""
        limit = JSON_LIMIT if limit is None else limit
        sink = _Sink(limit + 1)  # one byte past the limit tells a larger object
        generation = self._download(path, sink, end=limit)
        if sink.overflow or sink.count > limit:
            raise UnreadableObjectError(
                f"{self._subject(path)} is larger than {limit:,} bytes, which tpuctl never "
                "writes there: not read",
                hint=CO_WRITER,
            )
        return sink.value(), generation

    def read_range(self, path: str, start: int, length: int = READ_BLOCK) -> bytes:
        """At most `length` bytes of an object from byte `start` on (one ranged GET; b""
        past its end, a 416): a growing log followed in bounded memory."""
        sink = _Sink(length)
        self._download(path, sink, start=start, end=start + length - 1)
        return sink.value()

    def _download(
        self, path: str, sink: _Sink, start: int | None = None, end: int | None = None
    ) -> int:
        """The one way tpuctl reads an object's content: its stored bytes as they are
        (no decoding, so what is counted is what is kept), into `sink`, which takes no
        more than its bound however much the server sends; returns the generation.

        An object stored with a Content-Encoding (gzip) is refused: tpuctl never writes
        one, and decoding it would turn a small object into any size. Cloud Storage serves
        such an object compressed to a client that accepts gzip (the storage client asks
        for it), and decompresses it only for one that does not:
        https://cloud.google.com/storage/docs/transcoding"""

        def download() -> int:
            sink.reset()  # a retried read starts again
            blob = self._bucket.blob(path)
            try:
                blob.download_to_file(
                    sink, start=start, end=end, raw_download=True, timeout=TIMEOUT, retry=None
                )
            except gx.RequestRangeNotSatisfiable:  # an empty object, or a range past its end
                sink.reset()
            except _Overflow:
                pass  # the sink kept its bound: the caller says what that means
            encoding = (blob.content_encoding or "").strip().lower()
            if encoding not in ("", "identity"):
                raise UnreadableObjectError(
                    f"{self._subject(path)} is stored {encoding}-encoded (Content-Encoding: "
                    f"{encoding[:40]}), which tpuctl never writes there: not read",
                    hint=CO_WRITER,
                )
            return int(blob.generation or 0)

        generation = self._call(self._subject(path), download)
        with self._count:
            self.received += sink.count
        return generation

    # -- JSON objects (job records, status) --------------------------------------
    def read_json(self, path: str, limit: int | None = None) -> tuple[Any, int]:
        """A JSON object's value and generation (to write it back conditionally): at most
        `limit` bytes of it, and no more values than PARSE_BUDGET allows."""
        data, generation = self.read_bytes(path, limit)
        if parse_cost(data) > PARSE_BUDGET:
            raise UnreadableObjectError(
                f"{self._subject(path)} holds more values than tpuctl ever writes there: not read",
                hint=CO_WRITER,
            )
        try:
            return json.loads(data), generation
        except (ValueError, RecursionError) as e:
            why = str(e)[:200] if isinstance(e, ValueError) else "nested too deeply"
            raise UnreadableObjectError(f"{self._subject(path)} is not valid JSON: {why}") from None

    def download_to(self, name: str, target: Path, size: int) -> Path:
        """One object into the file `target` (its folders made), streamed: no more than
        `size` bytes (what its listing or the worker that wrote it said), else an error
        naming it and no file."""
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("wb") as out:
            sink = _Sink(size + 1, out)
            try:
                self._download(name, sink)
            except BaseException:
                target.unlink(missing_ok=True)
                raise
        if sink.overflow or sink.count != size:
            target.unlink(missing_ok=True)
            raise UnreadableObjectError(
                f"{self._subject(name)} has {'more than ' if sink.overflow else ''}"
                f"{sink.count:,} bytes, not the {size:,} expected: not written",
                hint=CO_WRITER,
            )
        return target


def parse_cost(data: bytes) -> int:
    """About the bytes of memory `json.loads(data)` takes at most: its text, decoded, and
    each value a Python object (a container, a key, a number: about 120 bytes at most,
    with its place in the container). Commas, brackets and braces bound the values (an
    overcount where they are inside strings, which only errs on the safe side)."""
    values = data.count(b",") + data.count(b"[") + data.count(b"{")
    return 2 * len(data) + 120 * values


class _Overflow(Exception):
    """A sink was sent more than its bound (ends the download)."""


class _Sink:
    """Where a download's bytes go, at most `bound` of them: into memory, or into the
    binary file `out`. More ends the download (the storage client streams a response into
    its file object block by block, so nothing past the bound is held)."""

    def __init__(self, bound: int, out: BinaryIO | None = None) -> None:
        self.bound, self._out = bound, out
        self._chunks: list[bytes] = []
        self.count, self.overflow = 0, False

    def reset(self) -> None:
        self._chunks, self.count, self.overflow = [], 0, False
        if self._out is not None:
            self._out.seek(0)
            self._out.truncate()

    def write(self, data: bytes) -> int:
        room = self.bound - self.count
        if len(data) > room:
            self.overflow = True
            data = data[:room]
        if self._out is not None:
            self._out.write(data)
        else:
            self._chunks.append(bytes(data))
        self.count += len(data)
        if self.overflow:
            raise _Overflow
        return len(data)

    def seek(self, offset: int, whence: int = 0) -> int:
        """Back to the start (the storage client's restart of a transcoded download)."""
        if (offset, whence) != (0, 0):
            raise OSError("a download sink only goes back to its start")
        self.reset()
        return 0

    def value(self) -> bytes:
        return b"".join(self._chunks)
