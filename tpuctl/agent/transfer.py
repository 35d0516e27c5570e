"""What the agent moves between the VM and the job's folder in the bucket: the code in,
the log, the outputs and the status out. Standard library only, Python 3.8+, like every
module of the agent."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import threading
import time
from functools import partial
from pathlib import Path
from typing import Any, Callable

from .downloads import TMP_SUFFIX
from .net import HttpError, Json, Mismatch
from .protocol import (
    BLOBS,
    Refused,
    cancel_asked,
    file_mode,
    notice_asked,
    request_path,
    verified_request,
)
from .storage import Storage
from .streams import Transfers


def _safe_parts(relative: str) -> list[str]:
    parts = relative.split("/")
    if not relative or relative.startswith("/") or ".." in parts or "" in parts:
        raise ValueError(f"unsafe path in the bucket: {relative!r}")
    return parts


def fetch_code(storage: Storage, job_id: str, dest: Path, digest: str, workers: int = 8) -> Json:
    """Download the job's code into `dest` and return its request, once the request is
    the one submitted (`digest`) and every file matches its sha256 in the manifest
    (protocol.Refused otherwise). Files already there with the right content are kept
    (a restart fetches nothing). Modes are masked to 0o755 or 0o644."""
    request = verified_request(storage.read_json(request_path(job_id))[0], job_id, digest)
    manifest = request["manifest"]
    items = [(dest.joinpath(*_safe_parts(rel)), e) for rel, e in sorted(manifest.items())]
    for rel, entry in request["manifest"].items():
        if not re.match(r"^[0-9a-f]{64}$", str(entry.get("sha256", ""))):
            raise Refused(f"the request names no sha256 for the code file {rel}")

    def one(transfers: Transfers, target: Path, entry: Json) -> None:
        mode = file_mode(entry)
        if target.is_file() and _digest(target, "sha256") == entry["sha256"]:
            os.chmod(str(target), mode)
        else:
            then = partial(os.chmod, str(target), mode)
            transfers.download(BLOBS + entry["sha256"], target, entry["sha256"], then=then)

    try:
        with Transfers(storage, threads=workers) as transfers:
            for target, entry in items:
                transfers.submit(one, transfers, target, entry)
    except Mismatch as e:  # a blob rewritten in the bucket: this is not the code submitted
        files = sorted(
            rel for rel, entry in request["manifest"].items() if e.name.endswith(entry["sha256"])
        )
        raise Refused(
            f"the code file {', '.join(files) or e.name} is not the one submitted: "
            f"{e.name} does not match its sha256, so nothing of the job runs"
        ) from None
    return dict(request)


def _digests(path: Path) -> tuple[str, str]:
    """(md5 as Cloud Storage lists it, sha256 in hex) of a file, read once."""
    md5, sha = hashlib.md5(), hashlib.sha256()
    with open(str(path), "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            md5.update(chunk)
            sha.update(chunk)
    return base64.b64encode(md5.digest()).decode(), sha.hexdigest()


def _digest(path: Path, algorithm: str) -> str:
    digest = hashlib.new(algorithm)
    with open(str(path), "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    if algorithm == "md5":  # as Cloud Storage reports it
        return base64.b64encode(digest.digest()).decode()
    return digest.hexdigest()


class LogUploader:
    """Uploads the whole log file when it has changed.

    Objects are immutable: the choice is rewriting the object or composing appended
    pieces. Rewriting keeps one object that readers always see whole, with no pieces to
    clean up and no 32-component compose limit. The live stream goes over SSH; this copy
    serves `tpuctl logs` later, so a big log is rewritten less often (every size / 2 MiB
    seconds at least), which bounds the upload rate.
    """

    def __init__(self, storage: Storage, local: Path, name: str, every: float = 5.0) -> None:
        self.storage, self.local, self.name, self.every = storage, local, name, every
        self._sent, self._last = (-1, -1), 0.0

    def upload(self, force: bool = False) -> bool:
        try:
            st = self.local.stat()
        except FileNotFoundError:
            return False
        state = (st.st_size, st.st_mtime_ns)
        due = time.monotonic() - self._last >= max(self.every, st.st_size / (2 << 20))
        if state == self._sent or not (force or due):
            return False
        Transfers(self.storage).upload_now(self.name, self.local, "text/plain; charset=utf-8")
        self._sent, self._last = state, time.monotonic()
        return True


RESTORE_ATTEMPTS = 5


class OutputSync:
    """Mirrors a local dir into `prefix`, uploading only the files that changed, many at
    once; large files are streamed in slices and chunks (streams.py). `hashes`: the
    sha256 of each file it knows the bucket holds as the local dir does (sent, kept or
    restored), handed to `on_synced` with their sizes after a sync that changed them
    (outputs.py: the manifest, by which the laptop downloads only what was sent)."""

    def __init__(
        self,
        storage: Storage,
        local: Path,
        prefix: str,
        on_synced: Callable[[dict[str, str], dict[str, int]], Any] | None = None,
        **transfers: Any,
    ) -> None:
        self.storage, self.local, self.prefix = storage, local, prefix
        self.transfers = transfers  # Transfers' options: threads, slice_size, chunk_size...
        self.on_synced = on_synced
        self._seen: dict[str, tuple[int, int]] = {}  # relative path -> (size, mtime) sent
        self._remote: dict[str, str] | None = None  # relative path -> md5 in the bucket
        self.hashes: dict[str, str] = {}  # relative path -> sha256
        self.sizes: dict[str, int] = {}  # relative path -> its size, as hashed
        self.skipped: list[str] = []  # the last restore's: in the bucket, not allowed
        self.refused: list[str] = []  # ... allowed, but not with that content
        self._lock = threading.Lock()

    def start_empty(self) -> None:
        """Restore nothing: a job's first attempt starts with what its script writes."""
        self._remote = {}

    def restore(self, allowed: dict[str, set[str]] | None = None) -> int:
        """Download what earlier attempts left in the bucket (a script may resume from it):
        everything, or only the files of `allowed`, each with one of its sha256 there
        (the others are left out: `skipped`, `refused`).

        The listing pins each object's generation; another worker writing the same name
        in between (workers of a slice share its outputs) replaces that generation, and
        its download answers 404: the listing is read again and the newer one fetched."""
        for _ in range(RESTORE_ATTEMPTS - 1):
            try:
                return self._restore_once(allowed)
            except HttpError as e:
                if e.status != 404:
                    raise
        return self._restore_once(allowed)

    def _restore_once(self, allowed: dict[str, set[str]] | None) -> int:
        remote: dict[str, str] = {}
        wanted = []
        self.skipped, self.refused = [], []
        for item in self.storage.objects(self.prefix):
            relative = item["name"][len(self.prefix) :]
            target = self.local.joinpath(*_safe_parts(relative))
            if allowed is not None and relative not in allowed:
                self.skipped.append(relative)
                continue
            remote[relative] = item.get("md5Hash", "")
            if not target.exists():
                wanted.append((item, target, relative))
        with Transfers(self.storage, **self.transfers) as transfers:
            for item, target, _ in wanted:
                generation = int(item.get("generation") or 0) or None
                transfers.download(
                    item["name"], target, md5=item.get("md5Hash"), generation=generation
                )
        for _, target, relative in wanted if allowed is not None else []:
            sha = _digest(target, "sha256")
            if sha in allowed.get(relative, set()):  # type: ignore[union-attr]
                self.hashes[relative] = sha
                self.sizes[relative] = target.stat().st_size
                continue
            target.unlink()
            del remote[relative]
            self.refused.append(relative)
        self._remote = remote
        return len(wanted) - len(self.refused)

    def recheck(self) -> int:
        """Forget the files sent that the bucket no longer has (a lifecycle rule deleted
        them), so that the next sync uploads them again, and write the manifest again
        (`on_synced`); returns how many."""
        present = {item["name"][len(self.prefix) :] for item in self.storage.objects(self.prefix)}
        with self._lock:
            gone = [relative for relative in self._seen if relative not in present]
            for relative in gone:
                del self._seen[relative]
            if self._remote is not None:
                self._remote = {k: v for k, v in self._remote.items() if k in present}
        if self.on_synced is not None and self.hashes:  # (the manifest: kept against the
            self.on_synced(dict(self.hashes), dict(self.sizes))  # lifecycle rule, too)
        return len(gone)

    def sync(self) -> int:
        """Upload new and changed files; returns how many."""
        if self._remote is None:  # nothing restored: what is there is not this job's
            self._remote = {}
        remote = self._remote
        uploaded, before = [], dict(self.hashes)

        def one(transfers: Transfers, path: Path, relative: str, st: os.stat_result) -> None:
            md5, sha = _digests(path)
            if remote.get(relative) != md5:
                obj = transfers.upload_now(self.prefix + relative, path)
                with self._lock:
                    remote[relative] = str(obj.get("md5Hash") or md5)
                    uploaded.append(relative)
            with self._lock:
                self._seen[relative] = (st.st_size, st.st_mtime_ns)
                self.hashes[relative] = sha
                self.sizes[relative] = st.st_size

        with Transfers(self.storage, **self.transfers) as transfers:
            for root, _dirs, files in os.walk(str(self.local)):
                for filename in sorted(f for f in files if not f.endswith(TMP_SUFFIX)):
                    path = Path(root, filename)
                    relative = path.relative_to(self.local).as_posix()
                    st = path.stat()
                    if self._seen.get(relative) != (st.st_size, st.st_mtime_ns):
                        transfers.submit(one, transfers, path, relative, st)
        if self.on_synced is not None and self.hashes != before:
            self.on_synced(dict(self.hashes), dict(self.sizes))
        return len(uploaded)


# -- the job ---------------------------------------------------------------------------------
class StatusWriter:
    """This worker's status object. The runner may write it too (`"cancel": true` to stop
    the job), so each write carries the generation last seen; on a 412 the agent reads
    the object again and keeps the request."""

    def __init__(self, storage: Storage, name: str, value: Json) -> None:
        self.storage, self.name, self.value = storage, name, value
        self.generation: int | None = None
        self.cancel_requested = False
        self.notice_requested = ""  # a peer's preemption notice passed on (protocol.py)
        self.lock = threading.Lock()  # the heartbeat thread writes too

    def write(self, **changes: Any) -> None:
        with self.lock:
            self._write(changes)

    def _write(self, changes: Json) -> None:
        self.value.update(changes, heartbeat=round(time.time(), 3))
        for _ in range(5):
            if self.generation is None:
                current, self.generation = self.storage.read_json(self.name)
                if cancel_asked(current, self.value["attempt"]):
                    self.cancel_requested = self.value["cancel"] = True
                told = notice_asked(current, self.value["attempt"])
                if told:  # kept in what it writes, as the cancel is
                    self.notice_requested = self.value["notice"] = told
            try:
                self.generation = self.storage.write_json(self.name, self.value, self.generation)
                return
            except HttpError as e:
                if e.status != 412:
                    raise
                self.generation = None
