"""Helpers for tests of the emulated workers' SSH servers."""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tpuctl.catalog import runtime_for
from tpuctl.cloud.ssh import ensure_key_pair
from tpuctl.emulator.core.ports import free_port
from tpuctl.emulator.workers.pidns import HOLDER_ENV, ns_pid

# The session emulator's instance id (set by tests/conftest.py): processes of other
# emulators on this machine (a user's, another test run's) are none of our business.
INSTANCE: str | None = None


def worker_processes(instance: str | None = None, holders: bool = False) -> list[int]:
    """Processes (not zombies) started on the workers of one emulator (default: the
    session's), as this machine numbers them; with `holders`, also the processes that
    hold the workers' PID namespaces (workers/sandbox.py)."""
    mine = (instance or INSTANCE or "").rstrip("/")
    needle = b"\0TPUCTL_EMULATOR_WORKER=" + (f"{mine}/".encode() if mine else b"")
    holder = f"\0{HOLDER_ENV}=1\0".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = b"\0" + f.read()
        except OSError:
            continue
        if needle in environ and (holders or holder not in environ + b"\0"):
            found.append(int(entry))
    return found


def mine(emulator_server: Any, holders: bool = False) -> Any:
    """`worker_processes` of this test session's emulator, as a function."""
    instance = emulator_server.backend.workers.instance + "/"
    return lambda: worker_processes(instance, holders)


def inner_pids(pids: list[int]) -> dict[int, int]:
    """{pid as its worker numbers it (its own PID namespace, where the emulator gives each
    worker one): pid on this machine} of worker processes (those that ended meanwhile
    left out)."""
    return {inner: pid for pid in pids if (inner := ns_pid(pid)) is not None}


def wait_until(condition: Any, what: str, timeout: float = 10.0) -> None:
    """Wait for an event that follows asynchronously (a killed process being reaped)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def user_key(home: Any, user: str = "alice") -> tuple[str, Any]:
    """A key pair under `home`; returns (public key line, private key path)."""
    path = home / f"id_{user}"
    return ensure_key_pair(path, user), path


def create(emulator: Any, node_id: str, accelerator: str = "v4-32", **fields: Any) -> Any:
    """A READY node (durations are 0 in tests) made with google-cloud-tpu."""
    from google.cloud import tpu_v2

    zone = "us-central2-b" if accelerator.startswith("v4") else "us-central1-a"
    node = tpu_v2.Node(
        accelerator_type=accelerator, runtime_version=runtime_for(accelerator), **fields
    )
    client = emulator.tpu_client()
    parent = f"projects/tpuctl-demo/locations/{zone}"
    return client.create_node(parent=parent, node_id=node_id, node=node).result()


def delete(emulator: Any, name: str) -> None:
    emulator.tpu_client().delete_node(name=name).result()


@dataclass
class Sshd:
    port: int
    host_public_key: str  # "ssh-ed25519 AAAA..."
    user: str
    key: Path  # the client's private key, authorized by the server
    root: Path
    address: str = "127.0.0.1"


def host_key_pair(path: Path) -> str:
    """A new ed25519 host key at `path`; returns its public line (`ssh-ed25519 AAAA...`)."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return " ".join(Path(f"{path}.pub").read_text().split()[:2])


@contextlib.contextmanager
def run_sshd(
    tmp_path: Path,
    address: str = "127.0.0.1",
    host_key: Path | None = None,
    client_key: Path | None = None,
) -> Iterator[Sshd]:
    """A real OpenSSH server (Debian's `sshd`) on `address`, holding `host_key` (a new one
    by default) and letting in the current user with `client_key` (a new one by default)."""
    binary = shutil.which("sshd") or "/usr/sbin/sshd"
    root = tmp_path / f"sshd-{address}"
    root.mkdir()
    if host_key is None:
        host_key = root / "host_key"
        host_key_pair(host_key)
    user = getpass.getuser()
    key = client_key or tmp_path / "client" / "id_ed25519"
    (root / "authorized_keys").write_text(ensure_key_pair(key, user) + "\n")
    port = free_port(address)
    (root / "sshd_config").write_text(
        f"ListenAddress {address}\nPort {port}\nHostKey {host_key}\n"
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
                socket.create_connection((address, port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, (root / "log").read_text()
                assert time.monotonic() < deadline, "sshd did not listen"
                time.sleep(0.02)
        public = Path(f"{host_key}.pub").read_text().split()
        yield Sshd(port, f"{public[0]} {public[1]}", user, key, root, address)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def other_host_keys() -> list[dict[str, str]]:
    """Guest-attribute entries of fresh host keys of every type a worker publishes: with
    them published, the worker's real keys are no longer what the cloud says."""
    import asyncssh

    from tpuctl.emulator.workers.files import HOST_KEYS

    return [
        {
            "namespace": "hostkeys",
            "key": algorithm,
            "value": asyncssh.generate_private_key(algorithm, **options)
            .export_public_key()
            .split()[1]
            .decode(),
        }
        for algorithm, (_, options, _) in HOST_KEYS.items()
    ]
