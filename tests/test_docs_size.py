"""The user docs stay short enough to read: every docs/*.md page is at most 25 KB, and the
whole of docs/ is at most 250 KB as `du -sb docs` counts it: the sizes of its files
(pages and images) plus the own entry of each folder (docs/ itself and docs/images/),
symlinks not followed. contributing/ (the contributors' pages) and the README are not
counted.

The docs met the goal on 2026-12-07 (`du -sb docs`: 247,554 bytes): the test holds it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGE_LIMIT = 25_000  # bytes, each docs/*.md page
GOAL = 250_000  # bytes, the whole of docs/ as `du -sb docs` counts it


def total_size(folder: Path) -> int:
    """What `du -sb folder` reports: the apparent size of the folder's own entry and of
    every entry under it (files, folders, symlinks themselves), symlinks not followed."""
    total = folder.lstat().st_size
    for here, folders, files in os.walk(folder):
        total += sum(Path(here, name).lstat().st_size for name in folders + files)
    return total


def test_every_docs_page_is_at_most_25_kb() -> None:
    pages = sorted(DOCS.glob("*.md"))
    assert pages
    over = {p.name: p.stat().st_size for p in pages if p.stat().st_size > PAGE_LIMIT}
    assert over == {}, f"pages over {PAGE_LIMIT} bytes: {over}"


def test_docs_total_is_at_most_250_kb() -> None:
    total = total_size(DOCS)
    assert total <= GOAL, f"`du -sb docs` is {total} bytes, over {GOAL}: cut, or link instead"


def test_the_total_is_what_du_sb_reports_for_docs_alone(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "images").mkdir(parents=True)
    (docs / "a.md").write_bytes(b"x" * 10)
    (docs / "images" / "b.svg").write_bytes(b"y" * 5)
    (tmp_path / "contributing").mkdir()
    (tmp_path / "contributing" / "c.md").write_bytes(b"z" * 100)
    folders = docs.lstat().st_size + (docs / "images").lstat().st_size
    assert total_size(docs) == 15 + folders
    du = shutil.which("du")
    if du:  # GNU du; one without -b (BSD) says so and is not asked
        r = subprocess.run([du, "-sb", str(docs)], capture_output=True, text=True, check=False)
        if r.returncode == 0:
            assert int(r.stdout.split()[0]) == total_size(docs)
