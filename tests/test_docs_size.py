"""The user docs stay short enough to read: every docs/*.md page is at most 25 KB, and the
whole of docs/ (pages and images, the sum of its files' sizes as `du -sb docs` counts
them, without the folders' own entries) is to be at most 250 KB. contributing/ (the
contributors' pages) and the README are not counted.

The docs met the goal on 2026-12-07 (247,546 bytes): the test holds it."""

from __future__ import annotations

from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGE_LIMIT = 25_000  # bytes, each docs/*.md page
GOAL = 250_000  # bytes, the whole of docs/


def total_size(folder: Path) -> int:
    """The sum of the sizes of the files under `folder`, symlinks not followed."""
    return sum(p.lstat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def test_every_docs_page_is_at_most_25_kb() -> None:
    pages = sorted(DOCS.glob("*.md"))
    assert pages
    over = {p.name: p.stat().st_size for p in pages if p.stat().st_size > PAGE_LIMIT}
    assert over == {}, f"pages over {PAGE_LIMIT} bytes: {over}"


def test_docs_total_is_at_most_250_kb() -> None:
    total = total_size(DOCS)
    assert total <= GOAL, f"docs/ is {total} bytes, over {GOAL}: cut, or link instead"


def test_the_total_counts_files_under_docs_only(tmp_path: Path) -> None:
    (tmp_path / "docs" / "images").mkdir(parents=True)
    (tmp_path / "docs" / "a.md").write_bytes(b"x" * 10)
    (tmp_path / "docs" / "images" / "b.svg").write_bytes(b"y" * 5)
    (tmp_path / "contributing").mkdir()
    (tmp_path / "contributing" / "c.md").write_bytes(b"z" * 100)
    assert total_size(tmp_path / "docs") == 15
