"""Every worker of every READY emulated node is an SSH host."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any

import asyncssh
import pytest

from tests.emulator.ssh_helpers import (
    create,
    delete,
    inner_pids,
    other_host_keys,
    user_key,
    wait_until,
    worker_processes,
)
from tpuctl.cloud.clients import ClientFactory
from tpuctl.emulator.core.server import EmulatorServer
from tpuctl.emulator.tpu.models import AddressAllocator
from tpuctl.services import ssh as ssh_service


@pytest.fixture(autouse=True)
def no_process_left() -> Any:
    yield
    wait_until(lambda: not worker_processes(holders=True), "the workers' processes to be gone")


def host_keys(emulator: Any, name: str) -> list[str]:
    attrs = emulator.tpu_client().get_guest_attributes(
        request={"name": name, "query_path": "hostkeys/"}
    )
    return [
        {i.key: i.value for i in ga.query_value.items if i.namespace == "hostkeys"}["ssh-ed25519"]
        for ga in attrs.guest_attributes
    ]


def known_hosts_file(tmp_path: Path, emulator: Any, node: Any) -> Path:
    port = emulator.status()["ssh_port"]
    keys = host_keys(emulator, node.name)
    path = tmp_path / "known_hosts"
    path.write_text(
        "".join(
            f"[{ep.ip_address}]:{port} ssh-ed25519 {key}\n"
            for ep, key in zip(node.network_endpoints, keys, strict=True)
        )
    )
    return path


def run(emulator: Any, tmp_path: Path, node: Any, worker: int, user: str, key: Path, cmd: str):
    async def main() -> Any:
        async with asyncssh.connect(
            node.network_endpoints[worker].ip_address,
            emulator.status()["ssh_port"],
            username=user,
            client_keys=[str(key)],
            known_hosts=str(known_hosts_file(tmp_path, emulator, node)),
            config=[],
            agent_path=None,
        ) as conn:
            return await conn.run(cmd, encoding=None)

    return asyncio.run(main())


def test_host_keys_are_published_per_worker_and_new_when_recreated(emulator) -> None:
    node = create(emulator, "hk", "v4-32")
    first = host_keys(emulator, node.name)
    assert len(set(first)) == 4 and all(k.startswith("AAAAC3NzaC1lZDI1NTE5") for k in first)
    delete(emulator, node.name)
    again = create(emulator, "hk", "v4-32")
    assert not set(host_keys(emulator, again.name)) & set(first)
    delete(emulator, again.name)


@pytest.mark.parametrize("algorithm", ["ssh-ed25519", "ecdsa-sha2-nistp256", "ssh-rsa"])
def test_each_published_host_key_is_the_one_the_worker_presents(
    emulator, tmp_path: Path, algorithm: str
) -> None:
    """A TPU VM publishes an RSA, an ECDSA and an Ed25519 host key; a client that takes
    only one of them (OpenSSH's HostKeyAlgorithms) finds it, and a wrong one is refused."""
    pub, key = user_key(tmp_path, "alice")
    node = create(emulator, "kinds", "v3-8", metadata={"ssh-keys": f"alice:{pub}"})
    try:
        attrs = emulator.tpu_client().get_guest_attributes(
            request={"name": node.name, "query_path": "hostkeys/"}
        )
        published = {i.key: i.value for i in attrs.guest_attributes[0].query_value.items}
        assert sorted(published) == ["ecdsa-sha2-nistp256", "ssh-ed25519", "ssh-rsa"]
        address, port = node.network_endpoints[0].ip_address, emulator.status()["ssh_port"]
        signature = "rsa-sha2-256" if algorithm == "ssh-rsa" else algorithm
        known = tmp_path / "known_hosts"

        def ssh(value: str) -> subprocess.CompletedProcess[str]:
            known.write_text(f"[{address}]:{port} {algorithm} {value}\n")
            return subprocess.run(
                ["ssh", "-F", "/dev/null", "-p", str(port), "-i", str(key), "-l", "alice",
                 "-o", f"UserKnownHostsFile={known}", "-o", "GlobalKnownHostsFile=/dev/null",
                 "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
                 "-o", "IdentitiesOnly=yes", "-o", f"HostKeyAlgorithms={signature}",
                 address, "echo", "in"],
                capture_output=True, text=True, timeout=30,
            )  # fmt: skip

        done = ssh(published[algorithm])
        assert (done.returncode, done.stdout) == (0, "in\n"), done.stderr
        other = {i["key"]: i["value"] for i in other_host_keys()}[algorithm]
        refused = ssh(other)
        assert refused.returncode == 255
        assert "Host key verification failed" in refused.stderr
    finally:
        delete(emulator, node.name)


def test_only_the_metadata_keys_of_their_own_user_get_in(emulator, tmp_path: Path) -> None:
    alice_pub, alice = user_key(tmp_path, "alice")
    _, mallory = user_key(tmp_path, "mallory")
    node = create(emulator, "auth", "v3-8", metadata={"ssh-keys": f"alice:{alice_pub}"})
    try:
        assert run(emulator, tmp_path, node, 0, "alice", alice, "whoami").exit_status == 0
        for user, key in (("bob", alice), ("mallory", mallory)):
            with pytest.raises(asyncssh.PermissionDenied):
                run(emulator, tmp_path, node, 0, user, key, "true")
    finally:
        delete(emulator, node.name)


def test_commands_get_the_workers_environment_and_home(emulator_server, emulator, tmp_path):
    pub, key = user_key(tmp_path)
    node = create(emulator, "envy", "v4-32", metadata={"ssh-keys": f"alice:{pub}"})
    try:
        for worker in (0, 3):
            want = emulator_server.backend.worker_env(node.name, worker)
            result = run(emulator, tmp_path, node, worker, "alice", key, "env; pwd")
            lines = result.stdout.decode().splitlines()
            got = dict(line.split("=", 1) for line in lines[:-1] if "=" in line)
            assert {k: got.get(k) for k in want} == want
            assert lines[-1] == want["HOME"]
            assert "TPUCTL_EMULATOR_HOST" not in got
        assert want["TPU_WORKER_ID"] == "3"
        hosts = [ep.ip_address for ep in node.network_endpoints]
        assert want["TPU_WORKER_HOSTNAMES"] == ",".join(hosts)
        assert want["TPU_ACCELERATOR_TYPE"] == "v4-32" and want["TPU_NAME"] == "envy"
        assert want["TPUCTL_TPU_URL"] == f"http://{emulator.address}"
        assert want["TPUCTL_METADATA_URL"] == (
            f"http://{emulator.address}/_emulator/v1/metadata/tpuctl-demo/us-central2-b/envy/3/"
            "computeMetadata/v1"
        )
        devices = want["TPUCTL_TPU_DEVICES"].split(",")
        assert len(devices) == 4 and all(Path(d).is_file() for d in devices)
    finally:
        delete(emulator, node.name)
    assert not Path(want["HOME"]).exists()


def test_stdout_stderr_and_status_arrive_whole(emulator, tmp_path: Path) -> None:
    pub, key = user_key(tmp_path)
    node = create(emulator, "streams", "v3-8", metadata={"ssh-keys": f"alice:{pub}"})
    try:
        # stderr closes long before stdout ends: nothing of stdout may be lost
        cmd = "echo early >&2; exec 2>&-; head -c 3000000 /dev/zero | tr '\\0' a; exit 42"
        result = run(emulator, tmp_path, node, 0, "alice", key, cmd)
        assert (len(result.stdout), set(result.stdout)) == (3000000, {ord("a")})
        assert (result.stderr, result.exit_status) == (b"early\n", 42)
    finally:
        delete(emulator, node.name)


def test_openssh_trusts_what_tpuctl_wrote_and_refuses_another_key(emulator, tmp_path) -> None:
    factory = ClientFactory()
    node = create(emulator, "openssh", "v4-32", network_config={"enable_external_ips": True})
    try:
        plan = ssh_service.plan(factory.tpu(), factory.ssh(), node.name, "2")
        argv = ssh_service.openssh_command(plan, ["-F", "/dev/null", "-o", "BatchMode=yes"])
        ok = subprocess.run([*argv, "echo $TPU_WORKER_ID"], capture_output=True, text=True)
        assert (ok.returncode, ok.stdout) == (0, "2\n"), ok.stderr
        wrong = host_keys(emulator, node.name)[1]  # worker 1's key published for worker 2
        emulator.set_guest_attributes(
            node.name, 2, [{"namespace": "hostkeys", "key": "ssh-ed25519", "value": wrong}]
        )
        plan = ssh_service.plan(factory.tpu(), factory.ssh(), node.name, "2")
        argv = ssh_service.openssh_command(plan, ["-F", "/dev/null", "-o", "BatchMode=yes"])
        refused = subprocess.run([*argv, "echo ran"], capture_output=True, text=True)
        assert refused.returncode == 255 and refused.stdout == ""
        assert "REMOTE HOST IDENTIFICATION HAS CHANGED" in refused.stderr
    finally:
        delete(emulator, node.name)


def test_stop_and_start_take_the_server_down_and_up(emulator, tmp_path: Path) -> None:
    pub, key = user_key(tmp_path)
    node = create(emulator, "power", "v3-8", metadata={"ssh-keys": f"alice:{pub}"})
    address = (node.network_endpoints[0].ip_address, emulator.status()["ssh_port"])
    client = emulator.tpu_client()
    try:
        # a process that leaves the session still belongs to the worker
        detached = "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!"
        started = run(emulator, tmp_path, node, 0, "alice", key, detached)
        assert started.exit_status == 0
        assert int(started.stdout) in inner_pids(worker_processes())
        client.stop_node(request={"name": node.name}).result()
        wait_until(lambda: not worker_processes(holders=True), "its processes to go")
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(address, timeout=5).close()
        client.start_node(request={"name": node.name}).result()
        assert run(emulator, tmp_path, node, 0, "alice", key, "echo back").stdout == b"back\n"
    finally:
        delete(emulator, node.name)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(address, timeout=5).close()


def test_status_names_the_ssh_port(emulator) -> None:
    port = emulator.status()["ssh_port"]
    assert isinstance(port, int) and port > 0


def test_stopping_the_emulator_leaves_no_server_thread_or_process(tmp_path: Path) -> None:
    from tests.conftest import Emulator

    threads = set(threading.enumerate())
    server = EmulatorServer(port=0, state_dir=None).start()
    control = Emulator(server.address)
    control.durations(create=0, hostkeys=0)
    pub, key = user_key(tmp_path)
    node = create(control, "left", "v3-8", metadata={"ssh-keys": f"alice:{pub}"})
    started = run(control, tmp_path, node, 0, "alice", key, "nohup sleep 300 >/dev/null 2>&1 &")
    instance = server.backend.workers.instance
    assert started.exit_status == 0 and worker_processes(instance)
    workers_dir = server.backend.workers.root
    server.stop()
    wait_until(lambda: not worker_processes(instance, holders=True), "its processes to go")
    assert [t.name for t in set(threading.enumerate()) - threads] == []
    assert not workers_dir.exists()


def test_two_emulators_hand_out_different_addresses() -> None:
    first, second = AddressAllocator(), AddressAllocator()
    assert set(first.allocate(64)).isdisjoint(second.allocate(64))


def test_reset_takes_every_worker_down(emulator, tmp_path: Path) -> None:
    pub, key = user_key(tmp_path)
    node = create(emulator, "reset", "v3-8", metadata={"ssh-keys": f"alice:{pub}"})
    home = run(emulator, tmp_path, node, 0, "alice", key, "nohup sleep 300 >/dev/null 2>&1 & pwd")
    assert worker_processes()
    emulator.reset()
    wait_until(lambda: not worker_processes(holders=True), "its processes to go")
    assert not Path(home.stdout.decode().strip()).exists()
    address = (node.network_endpoints[0].ip_address, emulator.status()["ssh_port"])
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(address, timeout=5).close()


def test_a_restarted_emulator_keeps_its_workers_host_keys(tmp_path: Path) -> None:
    from tests.conftest import Emulator

    state = tmp_path / "state"
    pub, key = user_key(tmp_path)
    server = EmulatorServer(port=0, state_dir=state).start()
    try:
        first = Emulator(server.address)
        first.durations(create=0, hostkeys=0)
        node = create(first, "kept", "v3-8", metadata={"ssh-keys": f"a:{pub}"})
        published = host_keys(first, node.name)
    finally:
        server.stop()
    again = EmulatorServer(port=0, state_dir=state).start()
    try:
        control = Emulator(again.address)
        assert host_keys(control, node.name) == published
        # strict checking against the published key: the server still has it
        assert run(control, tmp_path, node, 0, "a", key, "echo still-me").stdout == b"still-me\n"
        control.tpu_client().delete_node(name=node.name).result()
    finally:
        again.stop()


def test_a_restarted_emulator_serves_on_the_ports_it_had(tmp_path: Path) -> None:
    """Cloud endpoints never move: a client or agent that outlived a restart carries on."""
    state = tmp_path / "state"

    def ports(server: EmulatorServer) -> tuple[str | None, int | None, str | None]:
        b = server.backend
        return b.storage_endpoint, b.ssh_port, b.monitoring_endpoint

    first = EmulatorServer(port=0, state_dir=state).start()
    try:
        before = ports(first)
    finally:
        first.stop()
    again = EmulatorServer(port=0, state_dir=state).start()
    try:
        assert ports(again) == before
    finally:
        again.stop()
    # a port someone else took meanwhile: another one, not a failure
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past TIME_WAIT
        taken.bind(("127.0.0.1", int(str(before[0]).rsplit(":", 1)[1])))
        taken.listen()
        third = EmulatorServer(port=0, state_dir=state).start()
        try:
            assert ports(third)[0] != before[0] and ports(third)[1:] == before[1:]
        finally:
            third.stop()


def test_concurrent_authorizations_all_land(emulator, tmp_path: Path) -> None:
    node = create(emulator, "race", "v3-8")
    api = ClientFactory().tpu()
    users = [f"user{i}" for i in range(4)]
    keys = {u: user_key(tmp_path, u)[0] for u in users}
    threads = [
        threading.Thread(
            target=ssh_service.authorize, args=(api, api.get_node(node.name), u, keys[u])
        )
        for u in users
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # The TPU API has no metadata fingerprint, so concurrent writers can still undo one
    # another after each saw its own key land; what holds is that every client's next
    # authorization (each `tpuctl ssh` makes one) repairs it without dropping the others.
    for u in users:
        ssh_service.authorize(api, api.get_node(node.name), u, keys[u])
    metadata = api.get_node(node.name).metadata
    assert all(ssh_service.has_key(metadata, u, keys[u]) for u in users)
    delete(emulator, node.name)
