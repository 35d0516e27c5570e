"""Which files of a work dir make up a job's code, and their manifest.

Git's rules for ignoring, so that what is staged is what `git status` would show:
every `.gitignore` in the tree applies to its own directory and below, a deeper file
overrides a shallower one, and within one file the last matching pattern wins
(pathspec's GitIgnoreSpec implements the pattern language: globs, `**`, a trailing `/`
for directories only, a leading or inner `/` to anchor, `!` to re-include, escapes).
As in git, nothing inside an ignored directory can be re-included, and `.git` is never
staged. When the work dir lies inside a git repository, the `.gitignore` files of the
directories above it (up to the repository's root) and `.git/info/exclude` apply too,
as they do to `git status` run there. `--exclude` patterns use the same language,
anchored at the work dir, and win over every `.gitignore` (a `!` there cannot re-include
a file).

Symbolic links to files are staged as the file they point to; links to directories are
not followed (no cycles, nothing from outside the tree by surprise).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import pathspec

from tpuctl.errors import UsageError

_CHUNK = 1 << 20
# The file tpuctl leaves in every folder it brings job outputs home to (services/outputs.py):
# such a folder is never staged as a job's code, wherever it is.
OUTPUTS_MARKER = ".tpuctl-outputs"
MARKED = f"holds tpuctl's outputs: {OUTPUTS_MARKER}"


@dataclass(frozen=True)
class FileEntry:
    """One staged file: its content hash, size and mode (0o755 or 0o644, as git keeps it)."""

    sha256: str
    size: int
    mode: int

    def to_json(self) -> dict[str, object]:
        return {"sha256": self.sha256, "size": self.size, "mode": self.mode}


def _spec(lines: Iterable[str]) -> pathspec.GitIgnoreSpec:
    return pathspec.GitIgnoreSpec.from_lines(list(lines))


def _read_lines(path: Path) -> list[str] | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e}") from None


class IgnoreRules:
    """The `.gitignore` files that apply on the way down, plus the `--exclude` patterns.

    Each level is (strip, add, spec): a work-dir-relative path `p` is matched against the
    spec as `add + p[len(strip):]`, i.e. relative to the directory of its `.gitignore`.
    """

    def __init__(self, excludes: Iterable[str] = ()) -> None:
        self._excludes = _spec(excludes)
        self._levels: list[tuple[str, str, pathspec.GitIgnoreSpec]] = []

    def enter_repository(self, root: Path) -> None:
        """Apply `.git/info/exclude` and the `.gitignore` files above `root` in its repo."""
        ancestors: list[Path] = []
        if not (root / ".git").exists():
            for directory in root.parents:
                ancestors.append(directory)
                if (directory / ".git").exists():
                    break
            else:
                return  # not inside a repository
        top = ancestors[-1] if ancestors else root
        files = [(top, top / ".git" / "info" / "exclude")]  # the lowest precedence
        files += [(d, d / ".gitignore") for d in reversed(ancestors)]
        for directory, path in files:
            lines = _read_lines(path)
            if lines is not None:
                add = root.relative_to(directory).as_posix() + "/"
                self._levels.append(("", "" if add == "./" else add, _spec(lines)))

    def enter(self, directory: Path, prefix: str) -> int:
        """Read `directory/.gitignore` if any; returns the depth to `leave` back to."""
        depth = len(self._levels)
        lines = _read_lines(directory / ".gitignore")
        if lines is not None:
            self._levels.append((prefix, "", _spec(lines)))
        return depth

    def leave(self, depth: int) -> None:
        del self._levels[depth:]

    def ignored(self, relative: str, is_dir: bool) -> bool:
        """`relative` is the path from the work dir root, with `/` separators."""
        suffix = "/" if is_dir else ""
        if relative == ".git" or self._excludes.match_file(relative + suffix):
            return True
        for strip, add, spec in reversed(self._levels):  # the deepest .gitignore decides first
            result = spec.check_file(add + relative[len(strip) :] + suffix)
            if result.include is not None:
                return bool(result.include)
        return False


Identity = tuple[int, int]  # (st_dev, st_ino): a file or folder, whatever its name


@dataclass
class Selection:
    """The files to stage (sorted `/`-separated relative paths) and what was left out by
    identity (relative path -> why; a folder's path ends with `/`)."""

    files: list[str]
    omitted: dict[str, str]


def select(
    root: Path, excludes: Iterable[str] = (), omit: Mapping[Identity, str] | None = None
) -> Selection:
    """The files to stage under `root`; a file or folder whose identity is in `omit`, or a
    folder holding OUTPUTS_MARKER, is left out (its reason noted) when the ignore rules
    would have staged it."""
    root = root.resolve()
    if not root.is_dir():
        raise UsageError(f"the work dir {root} is not a directory")
    omit = omit or {}
    inodes = {ino for _, ino in omit}
    rules = IgnoreRules(excludes)
    rules.enter_repository(root)
    found: list[str] = []
    omitted: dict[str, str] = {}

    def visit(directory: Path, prefix: str) -> None:
        depth = rules.enter(directory, prefix)
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as e:
            raise UsageError(f"cannot read the directory {directory}: {e}") from None
        for entry in entries:
            relative = prefix + entry.name
            is_dir = entry.is_dir(follow_symlinks=False)
            if rules.ignored(relative, is_dir):
                continue
            if entry.inode() in inodes:  # st_dev needs a stat: only for a likely match
                with contextlib.suppress(OSError):
                    st = entry.stat(follow_symlinks=False)
                    why = omit.get((st.st_dev, st.st_ino))
                    if why is not None:
                        omitted[relative + ("/" if is_dir else "")] = why
                        continue
            if is_dir and os.path.lexists(os.path.join(entry.path, OUTPUTS_MARKER)):
                omitted[relative + "/"] = MARKED
            elif is_dir:
                visit(Path(entry.path), relative + "/")
            elif entry.is_file(follow_symlinks=True):  # skips broken links, dir links, fifos
                found.append(relative)
        rules.leave(depth)

    visit(root, "")
    return Selection(sorted(found), omitted)


def walk(root: Path, excludes: Iterable[str] = ()) -> list[str]:
    """The files to stage under `root`, as sorted `/`-separated relative paths."""
    return select(root, excludes).files


def identity(path: Path) -> Identity | None:
    """The identity of `path` (None when it does not exist)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


@dataclass
class Snapshot:
    """A file as it was read: its entry, its bytes when small enough to keep (else None:
    `copy` takes a snapshot of it when it must be sent), and whether it changed while it
    was read (a log still being written, say)."""

    entry: FileEntry
    data: bytes | None
    changed: bool


def _mode(st: os.stat_result) -> int:
    return 0o755 if st.st_mode & stat.S_IXUSR else 0o644


def _changed(before: os.stat_result, after: os.stat_result, size: int) -> bool:
    return (before.st_size, before.st_mtime_ns) != (after.st_size, after.st_mtime_ns) or (
        size != before.st_size
    )


def _chunks(f: BinaryIO, size: int) -> Iterator[bytes]:
    """The first `size` bytes of `f` (fewer if it shrank): a file still growing is taken
    as long as it was when opened."""
    while size > 0 and (chunk := f.read(min(_CHUNK, size))):
        size -= len(chunk)
        yield chunk


def read_file(path: Path, keep: int = 0) -> Snapshot:
    """Hash `path` in one read, as long as it was when opened, keeping its bytes when it
    is at most `keep` bytes long."""
    digest = hashlib.sha256()
    size = 0
    data: bytes | None = None
    with open(path, "rb") as f:
        before = os.fstat(f.fileno())
        if before.st_size <= keep:
            data = f.read(before.st_size)
            digest.update(data)
            size = len(data)
        else:
            for chunk in _chunks(f, before.st_size):
                digest.update(chunk)
                size += len(chunk)
        after = os.fstat(f.fileno())
    entry = FileEntry(digest.hexdigest(), size, _mode(after))
    return Snapshot(entry, data, _changed(before, after, size))


def copy_file(path: Path, dest: Path) -> Snapshot:
    """Copy `path` to `dest` (a private snapshot of a large file to send), hashing what
    was copied: the entry is the copy's."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f, open(dest, "wb") as out:
        before = os.fstat(f.fileno())
        for chunk in _chunks(f, before.st_size):
            digest.update(chunk)
            out.write(chunk)
            size += len(chunk)
        after = os.fstat(f.fileno())
    entry = FileEntry(digest.hexdigest(), size, _mode(after))
    return Snapshot(entry, None, _changed(before, after, size))


def own_files(outputs: Path | None, default: Path | None = None) -> dict[Identity, str]:
    """What tpuctl itself writes, left out of a job's code wherever it is (and why): this
    run's stdout and stderr when they go to files (`tpuctl run x.py > run.log`), the
    folder the outputs come home to (`outputs`: earlier jobs' outputs are not code), and
    the `default` one, where earlier runs brought theirs, whatever this one asks."""
    streams: dict[Identity, list[str]] = {}
    for fd, name in ((1, "stdout"), (2, "stderr")):
        try:
            st = os.fstat(fd)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            streams.setdefault((st.st_dev, st.st_ino), []).append(name)
    why = {ident: f"this run's {' and '.join(names)}" for ident, names in streams.items()}
    for folder in (default, outputs):
        ident = identity(folder) if folder is not None else None
        if ident is not None:
            why[ident] = "where job outputs come home"
    return why
