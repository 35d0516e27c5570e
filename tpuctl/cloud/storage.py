"""Bucket: the adapter over one Cloud Storage bucket, as tpuctl uses it.

Every call goes through `_call`, the seam that retries transient faults (the library's
own retries are switched off so there is one policy) and translates Google's exceptions
into tpuctl's. Objects are named by their full path in the bucket (`tpuctl/jobs/...`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from google.api_core import exceptions as gx
from google.cloud import storage

from tpuctl.cloud.errors import server_message, setup_error
from tpuctl.cloud.errors import translate as translate_api_error
from tpuctl.cloud.object_reads import Reads
from tpuctl.cloud.retry import call
from tpuctl.errors import (
    AccessDeniedError,
    AlreadyExistsError,
    NotFoundError,
    PreconditionFailedError,
    TpuctlError,
    UsageError,
)

T = TypeVar("T")
TIMEOUT = 60.0
UPLOAD_WORKERS = 8  # requests' default connection pool holds 10
_BUCKET_HINT = 'pass --bucket gs://NAME with a bucket of yours, or set `bucket = "NAME"` in '
_BUCKET_HINT += "tpuctl's config file"


@dataclass(frozen=True)
class ObjectInfo:
    name: str
    size: int
    generation: int
    md5: str  # base64, as Cloud Storage reports it
    updated: float = 0.0  # unix seconds of its last write, by Cloud Storage's clock


def translate(exc: BaseException, subject: str, where: str, hint: str) -> TpuctlError:
    """Google's exception -> tpuctl's, worded for Cloud Storage."""
    if isinstance(exc, gx.PreconditionFailed):
        return PreconditionFailedError(f"{subject} changed meanwhile (precondition failed)")
    if isinstance(exc, gx.NotFound):
        return NotFoundError(f"{subject} not found")
    setup = setup_error(exc, subject)
    if setup is not None:
        return setup
    if isinstance(exc, gx.Forbidden):
        return AccessDeniedError(
            f"permission denied on {subject}: {server_message(exc)}",
            hint="your account needs roles/storage.objectAdmin on the bucket; " + _BUCKET_HINT,
        )
    return translate_api_error(exc, subject, where, hint)


class Bucket(Reads):
    """One bucket: ensure it exists, upload, read and write JSON, list, download (the
    reads: object_reads.Reads)."""

    def __init__(
        self,
        client: storage.Client,
        name: str,
        where: str = "Cloud Storage",
        unreachable_hint: str = "",
    ) -> None:
        self._client = client
        self.name = name
        try:
            self._bucket = client.bucket(name)
        except ValueError as e:  # the library's own check of the name
            raise UsageError(f"invalid bucket name gs://{name}: {e}", hint=_BUCKET_HINT) from None
        self._where = where
        self._hint = unreachable_hint
        self._owner: str | None = None  # the owning project's number, once looked up
        self.location: str | None = None  # where it is (e.g. US-CENTRAL1), once looked up
        self.received = 0  # bytes of object content read so far (read_bytes, read_range)
        self._count = threading.Lock()

    @property
    def url(self) -> str:
        return f"gs://{self.name}"

    def _call(self, subject: str, fn: Callable[[], T]) -> T:
        return call(fn, lambda e: translate(e, subject, self._where, self._hint))

    def _subject(self, path: str) -> str:
        return f"gs://{self.name}/{path}"

    # -- the bucket itself ---------------------------------------------------
    def owner(self) -> str | None:
        """The number of the project that owns the bucket (its `projectNumber`); None when
        the bucket does not exist."""

        def read() -> str | None:
            self._lookup()
            return self._owner

        return self._call(f"bucket {self.url}", read)

    def _lookup(self) -> bool:
        try:
            found = self._client.lookup_bucket(self.name, timeout=TIMEOUT, retry=None)
        except gx.Forbidden as e:
            raise self._refused(
                e,
                f"bucket {self.url} exists but this account cannot use it "
                "(it may belong to another project)",
                _BUCKET_HINT,
            ) from None
        if found is not None:
            self.location = found.location
            number = found.project_number
            self._owner = str(number) if number else None
        return found is not None

    def _refused(self, exc: gx.Forbidden, message: str, hint: str) -> TpuctlError:
        """A 403 on the bucket: a project not set up (API, billing), else `message`."""
        setup = setup_error(exc, project=self._client.project)
        return setup if setup is not None else AccessDeniedError(message, hint=hint)

    def bucket_exists(self) -> bool:
        """Whether the bucket exists and this account may use it."""
        return self._call(f"bucket {self.url}", self._lookup)

    def lifecycle_rules(self) -> list[dict[str, Any]]:
        """The bucket's lifecycle rules, as the JSON API shows them (`action`, `condition`)."""

        def read() -> list[dict[str, Any]]:
            found = self._client.get_bucket(self.name, timeout=TIMEOUT, retry=None)
            return [dict(rule) for rule in found.lifecycle_rules]

        return self._call(f"bucket {self.url}", read)

    def add_delete_rule(self, prefix: str, days: int, attempts: int = 5) -> None:
        """Add a lifecycle rule deleting the objects under `prefix` once `days` days old,
        keeping the bucket's other rules (read, added to, written back only if nobody
        changed the bucket's metadata meanwhile)."""

        def add() -> None:
            found = self._client.get_bucket(self.name, timeout=TIMEOUT, retry=None)
            found.add_lifecycle_delete_rule(age=days, matches_prefix=[prefix])
            try:
                found.patch(
                    timeout=TIMEOUT, retry=None, if_metageneration_match=found.metageneration
                )
            except gx.Forbidden as e:
                raise self._refused(
                    e,
                    f"not allowed to change the lifecycle rules of {self.url}: {server_message(e)}",
                    "it needs storage.buckets.update (roles/storage.admin on the bucket)",
                ) from None

        for attempt in range(attempts):
            try:
                return self._call(f"bucket {self.url}", add)
            except PreconditionFailedError:
                if attempt == attempts - 1:
                    raise
        raise AssertionError("unreachable")

    def ensure(self, location: str) -> bool:
        """Make sure the bucket exists and is ours; create it in `location` if absent.

        Returns True when it was created now. A name held by another project is an
        error that says so (bucket names are global), as is a refused creation.
        """
        if self.bucket_exists():
            return False

        def create() -> bool:
            bucket = self._client.bucket(self.name)
            bucket.iam_configuration.uniform_bucket_level_access_enabled = True
            bucket.iam_configuration.public_access_prevention = "enforced"
            try:
                made = self._client.create_bucket(
                    bucket, location=location, timeout=TIMEOUT, retry=None
                )
                self.location = made.location or location
            except gx.Conflict:
                if self._lookup():  # a concurrent tpuctl of ours made it first
                    return False
                raise AlreadyExistsError(
                    f"the bucket name {self.url} is taken by another project "
                    "(bucket names are global)",
                    hint=_BUCKET_HINT,
                ) from None
            except gx.Forbidden as e:
                raise self._refused(
                    e,
                    f"not allowed to create the bucket {self.url} in project "
                    f"{self._client.project}: {server_message(e)}",
                    "your account needs roles/storage.admin to create it; " + _BUCKET_HINT,
                ) from None
            except gx.BadRequest as e:
                raise UsageError(
                    f"cannot create the bucket {self.url}: {server_message(e)}", hint=_BUCKET_HINT
                ) from None
            return True

        return self._call(f"bucket {self.url}", create)

    # -- uploads ---------------------------------------------------------------
    def upload_bytes(
        self,
        path: str,
        data: bytes,
        *,
        if_generation_match: int | None = None,
        content_type: str = "application/octet-stream",
    ) -> int:
        """Write one object; returns its generation. `if_generation_match=0`: only if absent."""

        def upload() -> int:
            blob = self._bucket.blob(path)
            blob.upload_from_string(
                data,
                content_type=content_type,
                if_generation_match=if_generation_match,
                timeout=TIMEOUT,
                retry=None,
            )
            return int(blob.generation or 0)

        return self._call(self._subject(path), upload)

    def upload_file(self, path: str, local: Path, *, if_generation_match: int | None = None) -> int:
        """Write one object from a file (streamed); returns its generation."""

        def upload() -> int:
            blob = self._bucket.blob(path)
            blob.upload_from_filename(
                str(local),
                content_type="application/octet-stream",
                if_generation_match=if_generation_match,
                timeout=TIMEOUT,
                retry=None,
            )
            return int(blob.generation or 0)

        return self._call(self._subject(path), upload)

    def upload_if_absent(self, path: str, source: Path | bytes) -> bool:
        """Upload a content-addressed file (or bytes) unless the object exists: True when
        uploaded. A 412 means someone (maybe our own lost first attempt) wrote it: that is
        fine, the content is the same by construction.
        """
        try:
            if isinstance(source, bytes):
                self.upload_bytes(path, source, if_generation_match=0)
            else:
                self.upload_file(path, source, if_generation_match=0)
        except PreconditionFailedError:
            return False
        return True

    def upload_files(
        self,
        items: Iterable[tuple[str, Path]],
        *,
        workers: int = UPLOAD_WORKERS,
        on_done: Callable[[str], None] | None = None,
    ) -> int:
        """Upload (object path, local file) pairs if absent, in parallel; returns how many
        were uploaded. The first failure is raised once the others have finished."""

        def one(item: tuple[str, Path]) -> bool:
            uploaded = self.upload_if_absent(*item)
            if on_done is not None:
                on_done(item[0])
            return uploaded

        work = list(items)
        if not work:
            return 0
        with ThreadPoolExecutor(max_workers=min(workers, len(work))) as pool:
            return sum(pool.map(one, work))

    # -- reads -----------------------------------------------------------------
    def objects(self, prefix: str) -> list[ObjectInfo]:
        """Every object under `prefix` (all pages)."""

        def fetch() -> list[ObjectInfo]:
            blobs = self._client.list_blobs(
                self.name, prefix=prefix, timeout=TIMEOUT, retry=None, page_size=1000
            )
            return [
                ObjectInfo(
                    b.name,
                    int(b.size or 0),
                    int(b.generation or 0),
                    b.md5_hash or "",
                    b.updated.timestamp() if b.updated else 0.0,
                )
                for b in blobs
            ]

        return self._call(self._subject(prefix), fetch)

    def names(self, prefix: str) -> set[str]:
        """The names of the objects under `prefix`: one listing instead of N existence checks."""
        return {info.name for info in self.objects(prefix)}

    def list_prefixes(self, prefix: str) -> list[str]:
        """The "folders" right under `prefix` (which ends in `/`), sorted, each ending in `/`."""

        def fetch() -> list[str]:
            it = self._client.list_blobs(
                self.name, prefix=prefix, delimiter="/", timeout=TIMEOUT, retry=None
            )
            for _ in it:  # the prefixes fill in as the pages are read
                pass
            return sorted(it.prefixes)

        return self._call(self._subject(prefix), fetch)

    def exists(self, path: str) -> bool:
        return self._call(
            self._subject(path),
            lambda: self._bucket.blob(path).exists(timeout=TIMEOUT, retry=None),
        )

    def write_json(self, path: str, value: Any, *, if_generation_match: int | None = None) -> int:
        """Write a JSON object; with a generation, only if nobody wrote it since (else
        PreconditionFailedError; 0: only if absent). Returns the new generation."""
        data = json.dumps(value, indent=1, sort_keys=True).encode()
        return self.upload_bytes(
            path, data, if_generation_match=if_generation_match, content_type="application/json"
        )

    def update_json(self, path: str, change: Callable[[Any], Any], attempts: int = 20) -> Any:
        """Read-modify-write under a generation precondition, retried when another writer
        got in between. `change` gets the value (None when absent) and returns the new one."""
        for _ in range(attempts):
            try:
                value, generation = self.read_json(path)
            except NotFoundError:
                value, generation = None, 0
            new = change(value)
            try:
                self.write_json(path, new, if_generation_match=generation)
                return new
            except PreconditionFailedError:
                continue
        raise PreconditionFailedError(f"{self._subject(path)} kept changing; gave up updating it")

    def delete(self, path: str, *, if_generation_match: int | None = None) -> None:
        """Delete an object (with a generation: only that one, else PreconditionFailedError)."""
        self._call(
            self._subject(path),
            lambda: self._bucket.blob(path).delete(
                timeout=TIMEOUT, retry=None, if_generation_match=if_generation_match
            ),
        )
