"""A job's files sent to the bucket's content-addressed blobs (`tpuctl/blobs/<sha256>`),
each read once, each distinct content sent once, a blob another writer replaced written
again. `staging.stage_job` runs one `BlobSender` over the work dir's files."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from tpuctl.agent.protocol import blob_path
from tpuctl.errors import PreconditionFailedError, UsageError
from tpuctl.services.workdir import Snapshot, copy_file, read_file

if TYPE_CHECKING:
    from tpuctl.cloud.storage import Bucket, ObjectInfo


INLINE_LIMIT = 32 << 20  # files up to this size are sent from the bytes read; larger, a copy


class BlobSender:
    """Reads each file once and sends what it read: the manifest names the bytes that
    were hashed, whatever the file became since (a log still being written is staged as
    it was when read). A blob already in the bucket, or being sent for another file of
    the same content, is not sent again."""

    def __init__(
        self, bucket: Bucket, root: Path, present: Mapping[str, ObjectInfo], spool: Path
    ) -> None:
        self.bucket, self.root, self.spool = bucket, root, spool
        self.present = present  # sha256 -> the blob the listing saw
        self.claimed = set(present)
        self.lock = threading.Lock()
        self.sent: list[int] = []  # the sizes of the blobs written now
        self.replaced: list[str] = []  # files whose blob in the bucket was not theirs
        self.rewritten: set[str] = set()

    def _check(self, relative: str, sha256: str, data: bytes) -> None:
        """A blob is named by its content's sha256, but the bucket is shared: one whose
        content another writer replaced would fail every job with that file (the VM
        checks each file's sha256). Its md5 (in the listing) is compared with the file's,
        and a blob that does not match is written again over the one seen."""
        seen = self.present.get(sha256)
        if seen is None or base64.b64encode(hashlib.md5(data).digest()).decode() == seen.md5:
            return
        with self.lock:
            if sha256 in self.rewritten:  # written again already, for a file alike
                return
            self.rewritten.add(sha256)
        # written again meanwhile (another client): the VM checks it anyway
        with contextlib.suppress(PreconditionFailedError):
            self.bucket.upload_bytes(blob_path(sha256), data, if_generation_match=seen.generation)
        with self.lock:
            self.replaced.append(relative)

    def _claim(self, sha256: str) -> bool:
        with self.lock:
            mine = sha256 not in self.claimed
            self.claimed.add(sha256)
            return mine

    def _send(self, sha256: str, source: Path | bytes, size: int) -> None:
        if self.bucket.upload_if_absent(blob_path(sha256), source):
            with self.lock:
                self.sent.append(size)

    def one(self, relative: str) -> Snapshot:
        path = self.root / relative
        try:
            shot = read_file(path, keep=INLINE_LIMIT)
            sha = shot.entry.sha256
            if shot.data is not None:
                if self._claim(sha):
                    self._send(sha, shot.data, shot.entry.size)
                else:
                    self._check(relative, sha, shot.data)
            elif sha not in self.claimed:  # too large to keep: sent from a private copy
                fd, name = tempfile.mkstemp(dir=self.spool)
                os.close(fd)
                copy = Path(name)
                try:
                    copied = copy_file(path, copy)
                    copied.changed |= shot.changed or copied.entry.sha256 != sha
                    shot = copied
                    if self._claim(shot.entry.sha256):
                        self._send(shot.entry.sha256, copy, shot.entry.size)
                finally:
                    copy.unlink()
        except OSError as e:
            raise UsageError(f"cannot read {path}: {e}") from None
        return shot
