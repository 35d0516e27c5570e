"""The registry's bytes: blobs (layers, configs, manifests) as files named by their
sha256 digest, and uploads under way, in the emulator's state dir (a temporary dir
without one). Content-addressed: a blob is written once, verified as it is written,
and moved into place whole (a reader never sees part of one)."""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import shutil
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path

DIGEST = re.compile(r"sha256:([0-9a-f]{64})")
MAX_BLOB = 4 << 30  # a layer larger than this is refused (SIZE_INVALID)
MAX_UPLOADS = 64  # uploads under way at once


class BlobError(Exception):
    """A refusal of the store: a registry error code and message (distribution.py)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


class Blobs:
    def __init__(self, state_dir: Path | None) -> None:
        self._temp = state_dir is None
        root = Path(tempfile.mkdtemp(prefix="tpuctl-registry-")) if state_dir is None else None
        self.root = root or Path(str(state_dir)) / "registry"
        (self.root / "sha256").mkdir(parents=True, exist_ok=True)
        (self.root / "uploads").mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._sizes: dict[str, int] = {}  # upload id -> bytes received

    def path(self, digest: str) -> Path | None:
        """The file of a stored blob, or None."""
        match = DIGEST.fullmatch(digest)
        path = self.root / "sha256" / match.group(1) if match else None
        return path if path is not None and path.is_file() else None

    def put(self, data: bytes) -> str:
        """Store bytes held in memory (a manifest); their digest."""
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        if self.path(digest) is None:
            upload = self.begin()
            self.append(upload, [data])
            self.finish(upload, digest)
        return digest

    # -- uploads ---------------------------------------------------------------------
    def begin(self) -> str:
        with self._lock:
            if len(self._sizes) >= MAX_UPLOADS:
                raise BlobError("TOOMANYREQUESTS", f"at most {MAX_UPLOADS} uploads at once")
            upload = secrets.token_hex(16)
            self._sizes[upload] = 0
        (self.root / "uploads" / upload).touch()
        return upload

    def size(self, upload: str) -> int:
        with self._lock:
            if upload not in self._sizes:
                raise BlobError("BLOB_UPLOAD_UNKNOWN", "blob upload unknown to registry")
            return self._sizes[upload]

    def append(self, upload: str, chunks: Iterable[bytes]) -> int:
        """Append a request's body to an upload; its size now."""
        size = self.size(upload)
        with open(self.root / "uploads" / upload, "ab") as out:
            for chunk in chunks:
                size += len(chunk)
                if size > MAX_BLOB:
                    self.cancel(upload)
                    raise BlobError("SIZE_INVALID", f"a blob is at most {MAX_BLOB} bytes here")
                out.write(chunk)
        with self._lock:
            self._sizes[upload] = size
        return size

    def finish(self, upload: str, digest: str) -> None:
        """Verify an upload's bytes against `digest` and store them; the upload ends
        either way (DIGEST_INVALID on a mismatch)."""
        self.size(upload)
        part = self.root / "uploads" / upload
        try:
            match = DIGEST.fullmatch(digest)
            if not match:
                raise BlobError("DIGEST_INVALID", f"unsupported or malformed digest {digest!r}")
            hasher = hashlib.sha256()
            with open(part, "rb") as source:
                for block in iter(lambda: source.read(1 << 20), b""):
                    hasher.update(block)
            if hasher.hexdigest() != match.group(1):
                raise BlobError(
                    "DIGEST_INVALID", f"digest {digest} does not match the uploaded content"
                )
            os.replace(part, self.root / "sha256" / match.group(1))
        finally:
            self.cancel(upload)

    def cancel(self, upload: str) -> None:
        with self._lock:
            self._sizes.pop(upload, None)
        (self.root / "uploads" / upload).unlink(missing_ok=True)

    def close(self) -> None:
        """Remove the uploads under way, and the whole store if it was temporary."""
        for upload in list(self._sizes):
            self.cancel(upload)
        if self._temp:
            shutil.rmtree(self.root, ignore_errors=True)
