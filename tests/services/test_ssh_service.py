"""The SSH service's rules: workers, user names, keys in metadata, known hosts."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tpuctl.cloud.clients import ClientFactory
from tpuctl.cloud.ssh import Endpoint, ensure_key_pair
from tpuctl.errors import CloudError, UntrustedHostKey, UsageError
from tpuctl.models import Node
from tpuctl.services import hostkeys, ssh


def test_worker_selection() -> None:
    assert ssh.parse_workers("all", 4) == [0, 1, 2, 3]
    assert ssh.parse_workers("0,2", 4) == [0, 2]
    assert ssh.parse_workers("1-3", 4) == [1, 2, 3]
    assert ssh.parse_workers(" 3,0-1,1 ", 4) == [0, 1, 3]
    with pytest.raises(UsageError, match="has 4 workers \\(0-3\\): there is no worker 4"):
        ssh.parse_workers("2-4", 4, "node pod")
    for bad in ("x", "3-1", "", ","):
        with pytest.raises(UsageError):
            ssh.parse_workers(bad, 4)


def test_user_names_are_made_valid_for_a_vm() -> None:
    assert ssh.ssh_user("alice") == "alice"
    assert ssh.ssh_user("John.Doe") == "john_doe"
    assert ssh.ssh_user("1st") == "_1st"
    assert ssh.ssh_user("x" * 40) == "x" * 32


def test_a_key_is_added_once_and_other_keys_are_kept() -> None:
    key = "ssh-ed25519 AAAAC3Nza1 me@laptop"
    metadata = {"ssh-keys": "bob:ssh-rsa AAAAB3 bob", "startup-script": "echo"}
    added = ssh.with_key(metadata, "alice", key)
    assert added == {
        "ssh-keys": "bob:ssh-rsa AAAAB3 bob\nalice:ssh-ed25519 AAAAC3Nza1 alice",
        "startup-script": "echo",
    }
    assert ssh.with_key(added, "alice", key) is None
    assert ssh.with_key(added, "carol", key) is not None  # the user is part of the entry


def test_authorize_patches_the_metadata_only_when_needed(emulator, tmp_path: Path) -> None:
    api = ClientFactory().tpu()
    client = emulator.tpu_client()
    from google.cloud import tpu_v2

    parent = "projects/tpuctl-demo/locations/us-central1-a"
    node_msg = tpu_v2.Node(
        accelerator_type="v3-8",
        runtime_version="tpu-ubuntu2204-base",
        metadata={"ssh-keys": "bob:ssh-rsa AAAAB3 bob", "other": "kept"},
    )
    client.create_node(parent=parent, node_id="meta", node=node_msg).result()
    name = f"{parent}/nodes/meta"
    try:
        public = ensure_key_pair(tmp_path / "key", "alice")
        assert ssh.authorize(api, api.get_node(name), "alice", public) is True
        node = api.get_node(name)
        assert node.metadata["other"] == "kept"
        assert node.metadata["ssh-keys"].splitlines()[0] == "bob:ssh-rsa AAAAB3 bob"
        assert ssh.has_key(node.metadata, "alice", public)
        assert ssh.authorize(api, node, "alice", public) is False
        assert emulator.requests()["PATCH patch"] == 1
    finally:
        client.delete_node(name=name).result()


def test_key_pair_is_created_private_and_then_reused(tmp_path: Path) -> None:
    path = tmp_path / ".ssh" / "google_compute_engine"
    first = ensure_key_pair(path, "alice")
    assert first.startswith("ssh-ed25519 ") and first.endswith(" alice")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert ensure_key_pair(path, "someone-else") == first
    Path(f"{path}.pub").unlink()  # a private key alone is enough
    assert ensure_key_pair(path, "x").split()[:2] == first.split()[:2]


def test_processes_starting_at_once_make_one_key_pair(tmp_path: Path) -> None:
    """A sweep's `tpuctl run`s on a new machine: each must authorize the key the file
    ends up holding, or the VMs refuse the ones whose key was overwritten. (A race: three
    rounds of twelve, which without the lock fail nearly always.)"""
    for round_ in range(3):
        _make_key_at_once(tmp_path / str(round_) / ".ssh" / "google_compute_engine", 12)


def _make_key_at_once(path: Path, processes: int) -> None:
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from tpuctl.cloud.ssh import ensure_key_pair\n"
        "sys.stdin.readline()\n"  # imports done: all start together
        "print(ensure_key_pair(Path(sys.argv[1]), 'alice'))\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for _ in range(processes)
    ]
    for proc in procs:  # the processes wait on their stdin: the fewest ms between them
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    said = [proc.communicate(timeout=60)[0].strip() for proc in procs]
    import asyncssh

    on_file = asyncssh.read_private_key(path).export_public_key().decode().split()[:2]
    assert all(line.split()[:2] == on_file for line in said), said
    assert Path(f"{path}.pub").read_text().split()[:2] == on_file
    assert not [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_a_pub_file_that_does_not_match_the_private_key_is_not_trusted(tmp_path: Path) -> None:
    path = tmp_path / ".ssh" / "google_compute_engine"
    first = ensure_key_pair(path, "alice")
    Path(f"{path}.pub").write_text(f"ssh-ed25519 {_public('ssh-ed25519')} alice\n")  # another's
    assert ensure_key_pair(path, "alice").split()[:2] == first.split()[:2]


def _public(algorithm: str) -> str:
    """The base64 field of a new public key of `algorithm`."""
    import asyncssh

    key = asyncssh.generate_private_key(
        algorithm, **({"key_size": 2048} if "rsa" in algorithm else {})
    )
    return key.export_public_key().decode().split()[1]


@pytest.fixture(scope="module")
def keys() -> dict[str, str]:
    return {kind: _public(kind) for kind in hostkeys.HOST_KEY_TYPES}


def test_well_formed_keys_of_every_accepted_type_pass(keys: dict[str, str]) -> None:
    assert {kind: hostkeys.host_key_problem(kind, value) for kind, value in keys.items()} == {
        kind: None for kind in hostkeys.HOST_KEY_TYPES
    }


P256 = "ecdsa-sha2-nistp256"


def _blob(*fields: bytes) -> str:
    import base64
    import struct

    return base64.b64encode(b"".join(struct.pack(">I", len(f)) + f for f in fields)).decode()


@pytest.mark.parametrize(
    ("kind", "value", "problem"),
    [
        ("ssh-dss", "ED25519", "not a host key type"),
        ("*", "ED25519", "not a host key type"),
        ("ssh-ed25519 X\n*", "ED25519", "not a host key type"),
        ("ssh-ed25519", "ED25519\n* ssh-ed25519 ED25519", "not one base64 key"),
        ("ssh-ed25519", "ED25519 trailing", "not one base64 key"),
        ("ssh-ed25519", "ED25519\n", "not one base64 key"),
        ("ssh-ed25519", " ED25519", "not one base64 key"),
        ("ssh-ed25519", "ED25519\r", "not one base64 key"),
        ("ssh-ed25519", "AAAA", "not an SSH public key"),  # length 0, nothing after
        ("ssh-ed25519", "AAAAC3NzaC1lZDI1NTE5AAAAIPlanted", "not an SSH public key"),
        ("ssh-ed25519", "ECDSA-NISTP256", "a key of another type"),
        ("ssh-rsa", "ED25519", "a key of another type"),
        ("ecdsa-sha2-nistp384", "ECDSA-NISTP256", "a key of another type"),
        ("ssh-ed25519", _blob(b"ssh-ed25519", b"\0" * 31), "not a well-formed ssh-ed25519 key"),
        ("ssh-ed25519", _blob(b"ssh-ed25519", b"\0" * 32, b"x"), "not a well-formed"),
        ("ssh-rsa", _blob(b"ssh-rsa", b"\x01\x00\x01", b"\x7f" * 64), "not a well-formed"),
        ("ssh-rsa", _blob(b"ssh-rsa", b"\x01\x00\x01", b"\xff" * 256), "not a well-formed"),
        (P256, _blob(P256.encode(), b"nistp384", b"\x04" + b"\0" * 64), "not a well-formed"),
        (P256, _blob(P256.encode(), b"nistp256", b"\x02" + b"\0" * 32), "not a well-formed"),
    ],
)  # fmt: skip
def test_anything_but_one_key_of_its_own_type_is_refused(
    keys: dict[str, str], kind: str, value: str, problem: str
) -> None:
    value = value.replace("ED25519", keys["ssh-ed25519"]).replace(
        "ECDSA-NISTP256", keys["ecdsa-sha2-nistp256"]
    )
    assert problem in (hostkeys.host_key_problem(kind, value) or "accepted")


def test_known_hosts_entries_are_replaced_per_worker_and_address(
    tmp_path: Path, keys: dict[str, str]
) -> None:
    k0, k1, n0, n1 = (
        keys["ssh-ed25519"],
        keys["ssh-rsa"],
        _public("ssh-ed25519"),
        _public("ssh-rsa"),
    )
    other = keys["ecdsa-sha2-nistp256"]
    path = tmp_path / "known_hosts"
    path.write_text(
        f"[10.0.0.9]:22 ecdsa-sha2-nistp256 {other} user-line\n"
        f"* ssh-ed25519 {other}\n10.0.0.8,10.0.0.9 ssh-ed25519 {other}\n"
        f"@cert-authority * ssh-ed25519 {other}\n|1|salt|hash ssh-ed25519 {other}\n"
    )
    node = Node(name="n1", project="p", zone="z", accelerator_type="v4-16", state="READY")
    eps = [Endpoint(0, "10.0.0.1", 22), Endpoint(1, "10.0.0.2", 2222)]
    hostkeys.write_known_hosts(path, node, eps, {0: [("ssh-ed25519", k0)], 1: [("ssh-rsa", k1)]})
    assert path.read_text().splitlines() == [
        f"[10.0.0.9]:22 ecdsa-sha2-nistp256 {other} user-line",
        f"10.0.0.1 ssh-ed25519 {k0} tpuctl:p/z/n1/w0",
        f"[10.0.0.2]:2222 ssh-rsa {k1} tpuctl:p/z/n1/w1",
    ]
    # the node was recreated: worker 0 has a new address and key, worker 1 a new key
    eps = [Endpoint(0, "10.0.0.7", 22), Endpoint(1, "10.0.0.2", 2222)]
    hostkeys.write_known_hosts(path, node, eps, {0: [("ssh-ed25519", n0)], 1: [("ssh-rsa", n1)]})
    assert path.read_text().splitlines() == [
        f"[10.0.0.9]:22 ecdsa-sha2-nistp256 {other} user-line",
        f"10.0.0.7 ssh-ed25519 {n0} tpuctl:p/z/n1/w0",
        f"[10.0.0.2]:2222 ssh-rsa {n1} tpuctl:p/z/n1/w1",
    ]


def test_known_hosts_are_written_for_one_address_and_good_keys_only(
    tmp_path: Path, keys: dict[str, str]
) -> None:
    path = tmp_path / "known_hosts"
    node = Node(name="n1", project="p", zone="z", accelerator_type="v3-8", state="READY")
    good = {0: [("ssh-ed25519", keys["ssh-ed25519"])]}
    for host in ("*", "10.0.0.1,*", "!10.0.0.1", "host name", "10.0.0.*"):
        with pytest.raises(CloudError, match="has no valid address"):
            hostkeys.write_known_hosts(path, node, [Endpoint(0, host, 22)], good)
    bad = {0: [("ssh-ed25519", keys["ssh-ed25519"] + "\n* ssh-ed25519 " + keys["ssh-ed25519"])]}
    with pytest.raises(UntrustedHostKey, match="not one base64 key"):
        hostkeys.write_known_hosts(path, node, [Endpoint(0, "10.0.0.1", 22)], bad)
    assert not path.exists()
    weird = Node(name="n1 *\n", project="p", zone="z", accelerator_type="v3-8", state="READY")
    hostkeys.write_known_hosts(path, weird, [Endpoint(0, "::1", 22)], good)
    assert path.read_text() == f"::1 ssh-ed25519 {keys['ssh-ed25519']} tpuctl:p/z/n1___/w0\n"
