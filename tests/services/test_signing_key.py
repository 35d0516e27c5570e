"""The client's signing key (tpuctl/services/run/signing.py): made once in the state dir,
readable by its user alone, the same on every run; or TPUCTL_SIGNING_KEY; never shown
in the `--debug` trace."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tpuctl import redact
from tpuctl.config import state_dir
from tpuctl.errors import UsageError
from tpuctl.services.run import signing


def test_the_key_is_made_once_readable_by_its_user_alone(isolated_env: Path) -> None:
    key = signing.key()
    path = state_dir() / "signing.key"
    assert len(key) == 64 and path.read_text().strip() == key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert signing.key() == key  # the same on the next run
    assert sorted(p.name for p in path.parent.iterdir()) == ["signing.key"]  # no draft left
    assert key not in redact.scrub(f"stdin: {key}")


def test_the_variable_gives_the_key_and_a_short_one_is_refused(
    isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TPUCTL_SIGNING_KEY", "c" * 40)
    assert signing.key() == "c" * 40
    assert not (state_dir() / "signing.key").exists()
    monkeypatch.setenv("TPUCTL_SIGNING_KEY", "short")
    with pytest.raises(UsageError, match="TPUCTL_SIGNING_KEY must hold at least 32 characters"):
        signing.key()
