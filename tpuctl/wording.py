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


# A job's output as bytes: colours (SGR: ESC [ ... m), tabs, newlines and carriage returns
# (progress bars) pass; any other control, a C1 control or a bidirectional one is shown as
# an escape: a log in the bucket may be anyone's, and OSC 52 writes the clipboard, OSC 0
# the title, a cursor move hides a line.
_TERMINAL_BYTES = re.compile(
    rb"(\x1b\[[0-9;:]{0,32}m)"
    rb"|([\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|\xc2[\x80-\x9f]|\xd8\x9c|\xe2\x80[\x8e\x8f\xaa-\xae]"
    rb"|\xe2\x81[\xa6-\xa9])"
)


def terminal_bytes(data: bytes) -> bytes:
    """`data` (a job's output) as a terminal may be given it: colours kept, every other
    control written as an escape (`\\x1b]0;...`)."""
    return _TERMINAL_BYTES.sub(
        lambda m: m.group(1) or ascii(m.group(2).decode("utf-8")).strip("'").encode(), data
    )


__all__ = ["count", "size"]


def count(n: int, noun: str, plural: str | None = None) -> str:
    """`1 file`, `2 files`, `0 files` (`plural` for nouns that do not take an s)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
