"""The small words of messages: counts and sizes."""

from __future__ import annotations

import pytest

from tpuctl import wording


@pytest.mark.parametrize(
    ("n", "said"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (5844, "5.7 KiB"),
        (612345678, "584.0 MiB"),
        (9797530848, "9.1 GiB"),
        (3 << 40, "3.0 TiB"),
        (5 << 50, "5120.0 TiB"),  # the largest unit, however large
    ],
)
def test_a_size_is_written_in_binary_units(n: int, said: str) -> None:
    assert wording.size(n) == said


def test_counts_take_the_right_plural() -> None:
    assert wording.count(1, "file") == "1 file"
    assert wording.count(2, "file") == "2 files"
    assert wording.count(0, "worker", "worker(s)") == "0 worker(s)"
