"""A real OpenSSH server (Debian's `sshd`) on a loopback port, started per test; the
default bucket in the emulator's Cloud Storage."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.emulator.ssh_helpers import Sshd, run_sshd
from tpuctl.cloud.clients import ClientFactory
from tpuctl.cloud.storage import Bucket
from tpuctl.services import staging

__all__ = ["Sshd", "bucket", "sshd"]


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[Sshd]:
    with run_sshd(tmp_path) as server:
        yield server


@pytest.fixture
def bucket(emulator) -> Bucket:  # noqa: ANN001
    b = ClientFactory().bucket(staging.default_bucket_name("tpuctl-demo"), "tpuctl-demo")
    b.ensure("us-central1")
    return b
