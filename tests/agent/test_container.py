"""How a worker's agent runs Docker (tpuctl/agent/container.py's `docker`): as root or
with Docker's socket, `docker`; as a user without it, through passwordless sudo where the
VM gives it (as TPU VMs give their SSH users), else `docker` alone, whose error says why.
A `sudo` of the test's own on PATH stands for the VM's."""

from __future__ import annotations

from pathlib import Path

import pytest

from tpuctl.agent import container


@pytest.fixture
def as_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user who is not root and whose Docker socket it may not use; PATH holds only the
    test's bin folder (where a test puts its `sudo`)."""
    monkeypatch.setattr(container, "_prefix", [])
    monkeypatch.setattr(container.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(container, "SOCKET", str(tmp_path / "no-docker.sock"))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    return bin_dir


def _sudo(bin_dir: Path, status: int) -> None:
    script = bin_dir / "sudo"
    script.write_text(f"#!/bin/sh\nexit {status}\n")
    script.chmod(0o755)


def test_a_user_with_passwordless_sudo_runs_docker_through_it(as_user: Path) -> None:
    _sudo(as_user, 0)
    assert container.docker() == ["sudo", "-n", "-E", "docker"]
    argv = container.command(
        {"name": "us-docker.pkg.dev/p/r/i@sha256:" + "a" * 64},
        "tpuctl-j-w0",
        {},
        [],
        as_user / "outputs",
        None,
        [],
        as_user / "job",
    )
    assert argv[:5] == ["sudo", "-n", "-E", "docker", "run"]


def test_a_user_whom_sudo_refuses_runs_docker_itself(as_user: Path) -> None:
    _sudo(as_user, 1)  # sudo -n: a password would be needed
    assert container.docker() == ["docker"]


def test_a_user_with_no_sudo_at_all_runs_docker_itself(as_user: Path) -> None:
    assert container.docker() == ["docker"]


def test_root_runs_docker_without_asking_sudo(
    as_user: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(container.os, "geteuid", lambda: 0)
    _sudo(as_user, 0)
    assert container.docker() == ["docker"]


def test_a_user_who_may_use_the_socket_runs_docker_itself(
    as_user: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    socket = tmp_path / "docker.sock"
    socket.write_text("")  # readable and writable by this test's user
    monkeypatch.setattr(container, "SOCKET", str(socket))
    _sudo(as_user, 0)
    assert container.docker() == ["docker"]
