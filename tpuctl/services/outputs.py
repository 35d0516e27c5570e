"""A job's outputs brought home from the bucket: only the files its own agents uploaded.

The outputs folder in the bucket (tpuctl/jobs/<id>/outputs/) can be written by any
principal that can write the bucket (every job VM of a default project). So what comes
home is what the job's signed manifests name (tpuctl/agent/manifests.py: each worker signs,
with the job's own key, the sha256 of every file it uploaded), each file checked against
a sha256 a manifest gives it once downloaded; a file no manifest names, or one whose
content is not what the job uploaded, stays in the bucket, said in one line. The job's
key is derived here from the client's (signing.job_key), so a manifest signed by another
job's agents never counts. Without the client key the job ran with (another machine),
nothing is verified, and nothing comes unless asked for with `unverified` (`tpuctl
outputs --unverified`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from tpuctl.agent import manifests, protocol, signing
from tpuctl.errors import NotFoundError, UnreadableObjectError
from tpuctl.services import records
from tpuctl.services.workdir import OUTPUTS_MARKER

if TYPE_CHECKING:
    from tpuctl.cloud.storage import Bucket

WORKERS = 8  # downloads at once, as storage.UPLOAD_WORKERS (requests' pool holds 10)
# The largest manifest read here (about 80,000 files per worker): the laptop's memory stays
# bounded whatever the bucket holds (cloud/storage.py's PARSE_BUDGET bounds the rest).
READ_LIMIT = 8 << 20


@dataclass
class Brought:
    """What came home, and what stayed in the bucket and why."""

    written: list[Path] = field(default_factory=list)
    unnamed: list[str] = field(default_factory=list)  # no manifest of the job names them
    changed: list[str] = field(default_factory=list)  # not the content the job uploaded
    unsigned: int = 0  # manifests not signed with this key
    refused: list[str] = field(default_factory=list)  # not what tpuctl writes (one line each)

    def notes(self, where: str) -> list[str]:
        """One line for each kind of file left in the bucket (none when all came)."""
        lines = []
        if self.unnamed:
            lines.append(
                f"outputs: {len(self.unnamed)} file(s) in {where} were uploaded by no agent of "
                f"this job (no manifest signed with this machine's key names them): left "
                f"there ({manifests.some(self.unnamed)})"
            )
        if self.changed:
            lines.append(
                f"outputs: {len(self.changed)} file(s) in {where} changed since the job "
                f"uploaded them: left there ({manifests.some(self.changed)})"
            )
        lines += [f"outputs: {why}" for why in self.refused]
        if self.unnamed and self.unsigned and not self.written:
            lines.append(
                "outputs: if the job ran from another machine, give its signing key "
                "(signing.key in its tpuctl state dir) as TPUCTL_SIGNING_KEY, or fetch them "
                "with `tpuctl outputs JOB --unverified` if you trust every writer of the bucket"
            )
        return lines


def unwritable(dest: Path, attempts: int = 3) -> str:
    """Why the outputs could not be written into the folder `dest` ("" when they can):
    tried, not guessed (os.access says yes to root anywhere, in /proc too). A missing
    folder is made for the try, a file created and removed in it, and what the try made is
    removed again. Runs started together in one folder try it together: a folder another
    made meanwhile is theirs, and one another removed meanwhile is tried again."""
    for _ in range(attempts):
        why = _try_writing(dest)
        if why is not None:
            return why
    return f"{dest} kept vanishing while tried (another process removes it)"


def _try_writing(dest: Path) -> str | None:
    """`unwritable`'s one try: None when a folder vanished under it (another try's)."""
    dest = dest.expanduser().absolute()
    missing = [dest, *(p for p in dest.parents if not p.exists())]
    if dest.exists():
        if not dest.is_dir():  # or it went meanwhile (another's try): again
            return None if dest.is_dir() or not dest.exists() else f"{dest} is not a folder"
        missing = []
    above = next((p for p in dest.parents if p.exists()), None)
    if missing and above is not None and not above.is_dir():
        return f"{above} is not a folder"
    made: list[Path] = []
    try:
        for folder in reversed(missing):
            try:
                folder.mkdir()
            except FileExistsError:
                continue  # another run's try made it meanwhile
            except FileNotFoundError as e:
                if not folder.parent.exists():
                    return None  # another's try removed the one above it: again
                return f"cannot create {folder}: {e.strerror or e}"
            except OSError as e:
                return f"cannot create {folder}: {e.strerror or e}"
            made.append(folder)
        try:
            fd, probe = tempfile.mkstemp(prefix=".tpuctl-probe-", dir=dest)
            os.close(fd)
            os.unlink(probe)
        except FileNotFoundError as e:
            if not made and not dest.exists():
                return None  # another's try removed it: again
            return f"cannot write in {dest}: {e.strerror or e}"
        except OSError as e:
            return f"cannot write in {dest}: {e.strerror or e}"
        return ""
    finally:
        for folder in reversed(made):
            with contextlib.suppress(OSError):
                folder.rmdir()


def mark(dest: Path) -> None:
    """Say in `dest` that tpuctl writes outputs there: staging leaves such a folder out of
    a job's code wherever it is (workdir.select)."""
    dest.mkdir(parents=True, exist_ok=True)
    marker = dest / OUTPUTS_MARKER
    if not marker.exists():
        marker.write_text(
            "tpuctl brought job outputs home here; `tpuctl run` leaves this folder out of "
            "a job's code\n"
        )


def download(bucket: Bucket, job_id: str, dest: Path, key: str, verify: bool = True) -> Brought:
    """The job's outputs (every slice's) into `dest`, keeping their paths: with `verify`,
    only those its manifests signed with its key (of the client's `key`) name, each with
    the content they name."""
    prefix = protocol.outputs_prefix(job_id)
    allowed, sizes, unsigned = _allowed(bucket, job_id, key) if verify else ({}, {}, 0)
    brought = Brought(unsigned=unsigned)
    root = dest.resolve()
    wanted: list[tuple[str, str, int]] = []
    for info in bucket.objects(prefix):
        relative = info.name[len(prefix) :].lstrip("/")
        parts = PurePosixPath(relative).parts
        if not parts or info.name.endswith("/") or ".." in parts:
            continue  # folder placeholders, or names that would escape dest
        if verify and relative not in allowed:
            brought.unnamed.append(relative)
        elif verify and relative in sizes and info.size not in sizes[relative]:
            brought.changed.append(relative)  # not the size sent: not downloaded at all
        else:
            wanted.append((info.name, relative, info.size))

    def one(item: tuple[str, str, int]) -> Path | None:
        name, relative, size = item
        target = root.joinpath(*PurePosixPath(relative).parts)
        part = target.with_name(f".{target.name}.tpuctl-part")
        try:
            bucket.download_to(name, part, size)
        except UnreadableObjectError as e:
            brought.refused.append(str(e))
            return None
        if verify and sha256(part) not in allowed[relative]:
            part.unlink()
            brought.changed.append(relative)
            return None
        os.replace(part, target)
        return target

    if wanted:
        mark(root)
        with ThreadPoolExecutor(max_workers=min(WORKERS, len(wanted))) as pool:
            brought.written = [p for p in pool.map(one, wanted) if p is not None]
    return brought


def _allowed(
    bucket: Bucket, job_id: str, key: str
) -> tuple[dict[str, set[str]], dict[str, set[int]], int]:
    """Each output (its path under the job's outputs folder) that a manifest of this job
    signed with its key (of the client's `key`) names, with the sha256s it may have, and
    the sizes it may have (where the manifests say: an older agent's do not); and how many
    manifests were not signed so."""
    key = signing.job_key(key, job_id) if key else ""
    allowed: dict[str, set[str]] = {}
    sizes: dict[str, set[int]] = {}
    unsigned = 0
    for info in bucket.objects(protocol.job_path(job_id, "manifests", "")):
        value = None
        try:
            value = bucket.read_json(info.name, READ_LIMIT)[0]
        except UnreadableObjectError as e:
            records.note(f"gs://{bucket.name}/{info.name}", e.message)
        except NotFoundError:
            pass
        if not manifests.trusted(value, key, job_id):
            unsigned += 1
            continue
        assert isinstance(value, dict)
        said: dict[str, Any] = value.get("sizes") or {}
        said = said if isinstance(said, dict) else {}
        for relative, sha in value["files"].items():
            size = said.get(relative)
            # a multislice job's slices upload under slice-<s>/, a single slice's at the top
            for name in (str(relative), f"slice-{value['slice']}/{relative}"):
                allowed.setdefault(name, set()).add(str(sha))
                if isinstance(size, int) and not isinstance(size, bool):
                    sizes.setdefault(name, set()).add(size)
    return allowed, sizes, unsigned


def sha256(path: Path) -> str:
    """A local file's sha256 (read in blocks)."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
