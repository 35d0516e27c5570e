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

import hashlib
import os
import stat
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pathspec

from tpuctl.errors import UsageError

HASH_WORKERS = 4
_CHUNK = 1 << 20


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


def walk(root: Path, excludes: Iterable[str] = ()) -> list[str]:
    """The files to stage under `root`, as sorted `/`-separated relative paths."""
    root = root.resolve()
    if not root.is_dir():
        raise UsageError(f"the work dir {root} is not a directory")
    rules = IgnoreRules(excludes)
    rules.enter_repository(root)
    found: list[str] = []

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
            if is_dir:
                visit(Path(entry.path), relative + "/")
            elif entry.is_file(follow_symlinks=True):  # skips broken links, dir links, fifos
                found.append(relative)
        rules.leave(depth)

    visit(root, "")
    return sorted(found)


def hash_file(path: Path) -> FileEntry:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    executable = os.stat(path).st_mode & stat.S_IXUSR
    return FileEntry(digest.hexdigest(), size, 0o755 if executable else 0o644)


def build_manifest(root: Path, files: Iterable[str]) -> dict[str, FileEntry]:
    """relative path -> FileEntry, hashing a few files at a time."""
    files = list(files)

    def one(relative: str) -> FileEntry:
        try:
            return hash_file(root / relative)
        except OSError as e:
            raise UsageError(f"cannot read {root / relative}: {e}") from None

    with ThreadPoolExecutor(max_workers=HASH_WORKERS) as pool:
        return dict(zip(files, pool.map(one, files), strict=True))
