"""Small words for messages: counts with the right plural."""

from __future__ import annotations

from tpuctl.agent.protocol import size

__all__ = ["count", "size"]


def count(n: int, noun: str, plural: str | None = None) -> str:
    """`1 file`, `2 files`, `0 files` (`plural` for nouns that do not take an s)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
