"""A real OpenSSH server (Debian's `sshd`) on a loopback port, started per test."""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tpuctl.cloud.ssh import ensure_key_pair
from tpuctl.emulator.ports import free_port


@dataclass
class Sshd:
    port: int
    host_public_key: str  # "ssh-ed25519 AAAA..."
    user: str
    key: Path  # the client's private key, authorized by the server
    root: Path


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[Sshd]:
    binary = shutil.which("sshd") or "/usr/sbin/sshd"
    root = tmp_path / "sshd"
    root.mkdir()
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(root / "host_key")], check=True
    )
    user = getpass.getuser()
    key = tmp_path / "client" / "id_ed25519"
    (root / "authorized_keys").write_text(ensure_key_pair(key, user) + "\n")
    port = free_port()
    (root / "sshd_config").write_text(
        f"ListenAddress 127.0.0.1\nPort {port}\nHostKey {root / 'host_key'}\n"
        f"AuthorizedKeysFile {root / 'authorized_keys'}\nPidFile none\nStrictModes no\n"
        "UsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "PermitRootLogin prohibit-password\nSubsystem sftp internal-sftp\n"
    )
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation
    with open(root / "log", "wb") as log:
        proc = subprocess.Popen(
            [binary, "-D", "-e", "-f", str(root / "sshd_config")],
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, (root / "log").read_text()
                assert time.monotonic() < deadline, "sshd did not listen"
                time.sleep(0.02)
        public = (root / "host_key.pub").read_text().split()
        yield Sshd(port, f"{public[0]} {public[1]}", user, key, root)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
