"""A real OpenSSH server (Debian's `sshd`) on a loopback port, started per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.emulator.ssh_helpers import Sshd, run_sshd

__all__ = ["Sshd", "sshd"]


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[Sshd]:
    with run_sshd(tmp_path) as server:
        yield server
