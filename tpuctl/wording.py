"""Small words for messages: counts with the right plural."""

from __future__ import annotations

import re

from tpuctl.agent.protocol import size

# What a terminal would act on rather than show: C0 and C1 controls (ESC starts a colour,
# a title, a cursor move) but for tab and newline, DEL, and the bidirectional controls that
# reorder what follows (U+202E shows `evil\u202etxt.exe` as `evilexe.txt`).
_UNPRINTABLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)


def printable(text: str) -> str:
    """`text` with what a terminal would act on written as an escape (`\\x1b`, `\\u202e`):
    for anything read from the bucket or typed by a user that tpuctl prints."""
    return _UNPRINTABLE.sub(lambda m: ascii(m.group())[1:-1], text)


__all__ = ["count", "size"]


def count(n: int, noun: str, plural: str | None = None) -> str:
    """`1 file`, `2 files`, `0 files` (`plural` for nouns that do not take an s)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
