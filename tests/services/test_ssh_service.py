"""The SSH service's rules: workers, user names, keys in metadata, known hosts."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tpuctl.cloud.clients import ClientFactory
from tpuctl.cloud.ssh import Endpoint, ensure_key_pair
from tpuctl.errors import UsageError
from tpuctl.models import Node
from tpuctl.services import ssh


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


def test_known_hosts_entries_are_replaced_per_worker_and_address(tmp_path: Path) -> None:
    path = tmp_path / "known_hosts"
    path.write_text("[10.0.0.9]:22 ssh-ed25519 OTHERS user-line\n")
    node = Node(name="n1", project="p", zone="z", accelerator_type="v4-16", state="READY")
    eps = [Endpoint(0, "10.0.0.1", 22), Endpoint(1, "10.0.0.2", 2222)]
    ssh.write_known_hosts(path, node, eps, {0: [("ssh-ed25519", "K0")], 1: [("ssh-rsa", "K1")]})
    assert path.read_text().splitlines() == [
        "[10.0.0.9]:22 ssh-ed25519 OTHERS user-line",
        "10.0.0.1 ssh-ed25519 K0 tpuctl:p/z/n1/w0",
        "[10.0.0.2]:2222 ssh-rsa K1 tpuctl:p/z/n1/w1",
    ]
    # the node was recreated: worker 0 has a new address and key, worker 1 a new key
    eps = [Endpoint(0, "10.0.0.7", 22), Endpoint(1, "10.0.0.2", 2222)]
    ssh.write_known_hosts(path, node, eps, {0: [("ssh-ed25519", "N0")], 1: [("ssh-rsa", "N1")]})
    assert path.read_text().splitlines() == [
        "[10.0.0.9]:22 ssh-ed25519 OTHERS user-line",
        "10.0.0.7 ssh-ed25519 N0 tpuctl:p/z/n1/w0",
        "[10.0.0.2]:2222 ssh-rsa N1 tpuctl:p/z/n1/w1",
    ]
