"""Each emulated worker has a root of its own (bubblewrap): nothing sent to a worker, by
SSH, SFTP, scp or its startup script, writes outside the emulator's workers dir."""

from __future__ import annotations

import asyncio
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncssh
import pytest

from tests.emulator.ssh_helpers import create, delete, mine, user_key, wait_until
from tests.emulator.test_ssh_workers import known_hosts_file, run
from tpuctl.emulator.core.server import EmulatorServer
from tpuctl.emulator.workers.sandbox import BWRAP_ENV, REFUSAL, Sandbox


@pytest.fixture(autouse=True)
def no_process_left(emulator_server: Any) -> Any:
    yield
    procs = mine(emulator_server, holders=True)  # the workers' PID namespaces too
    wait_until(lambda: not procs(), "the workers' processes to be gone")


WHERE = ("/var/log", "/tmp", "/usr")  # where the tests below try to write, besides /


@pytest.fixture
def unique() -> Iterator[str]:
    """A name no path on this machine has; whatever a failing test left under / goes."""
    name = f"tpuctl-sandbox-test-{secrets.token_hex(6)}"
    yield name
    for leak in (Path(f"/{name}"), Path(f"/{name}-out"), *(Path(d) / name for d in WHERE)):
        if leak.is_dir() and not leak.is_symlink():
            shutil.rmtree(leak, ignore_errors=True)
        else:
            leak.unlink(missing_ok=True)


@pytest.fixture
def node(emulator: Any, tmp_path: Path) -> Iterator[tuple[Any, Path]]:
    """A READY v3-8 whose worker lets `alice` in, and alice's key."""
    pub, key = user_key(tmp_path)
    made = create(emulator, "boxed", "v3-8", metadata={"ssh-keys": f"alice:{pub}"})
    yield made, key
    delete(emulator, made.name)


def _root(emulator_server: Any, node: Any) -> Path:
    home = Path(emulator_server.backend.worker_env(node.name, 0)["HOME"])
    return home.parent / "root"


def _connect(emulator: Any, tmp_path: Path, node: Any, key: Path) -> Any:
    """An asyncssh connection to worker 0 of `node` as alice, trusting what it published."""
    return asyncssh.connect(
        node.network_endpoints[0].ip_address,
        emulator.status()["ssh_port"],
        username="alice",
        client_keys=[str(key)],
        known_hosts=str(known_hosts_file(tmp_path, emulator, node)),
        config=[],
        agent_path=None,
    )


def _sftp(emulator: Any, tmp_path: Path, node: Any, key: Path, work: Any) -> Any:
    async def main() -> Any:
        async with (
            _connect(emulator, tmp_path, node, key) as conn,
            conn.start_sftp_client() as sftp,
        ):
            return await work(sftp)

    return asyncio.run(main())


def test_commands_write_in_the_workers_root_not_the_machines(
    emulator, emulator_server, node, tmp_path: Path, unique: str
) -> None:
    made, key = node
    root = _root(emulator_server, made)
    done = run(
        emulator, tmp_path, made, 0, "alice", key,
        f"touch /{unique} && mkdir -p /var/log/{unique}/x && echo hi > /tmp/{unique} && ls -d /*",
    )  # fmt: skip
    assert done.exit_status == 0, done.stderr
    assert f"/{unique}" in done.stdout.decode().split()
    assert not Path(f"/{unique}").exists() and not Path(f"/var/log/{unique}").exists()
    assert not Path(f"/tmp/{unique}").exists()
    assert (root / unique).is_file() and (root / "var/log" / unique / "x").is_dir()
    assert (root / "tmp" / unique).read_text() == "hi\n"
    # the system is read-only; the worker's python3 and home are there
    done = run(
        emulator, tmp_path, made, 0, "alice", key,
        f"touch /usr/{unique} 2>/dev/null || echo refused; python3 -c 'print(6*7)'; pwd",
    )  # fmt: skip
    home = emulator_server.backend.worker_env(made.name, 0)["HOME"]
    assert done.stdout.decode().splitlines() == ["refused", "42", home]
    assert not Path(f"/usr/{unique}").exists()


def test_sftp_cannot_leave_the_worker(emulator, emulator_server, node, tmp_path, unique) -> None:
    made, key = node
    root = _root(emulator_server, made)
    up = "../" * 20
    # links made on the worker: absolute ones are followed as this machine sees them
    done = run(
        emulator, tmp_path, made, 0, "alice", key,
        f"ln -s / /{unique}-out && ln -s {up} ~/up && ln -s /usr ~/usr",
    )  # fmt: skip
    assert done.exit_status == 0, done.stderr
    local = tmp_path / "payload"
    local.write_text("x\n")

    async def work(sftp: Any) -> list[str]:
        outcomes = []
        for remote in (f"{up}{unique}", f"~/up/{unique}", f"/{unique}-out/{unique}", "~/usr/x"):
            try:
                await sftp.put(str(local), remote)
                outcomes.append("written")
            except asyncssh.SFTPPermissionDenied:
                outcomes.append("denied")
        for remote in (f"{up}etc/hostname", f"/{unique}-out/etc/hostname"):
            try:
                await sftp.stat(remote)
                outcomes.append("seen")
            except asyncssh.SFTPPermissionDenied:
                outcomes.append("denied")
        # `..` above `/` is `/`, as anywhere: the worker's root
        await sftp.put(str(local), f"/{up}{unique}")
        outcomes.append(await sftp.realpath(f"/{up}{unique}"))
        return outcomes

    got = _sftp(emulator, tmp_path, made, key, work)
    assert got == ["denied"] * 6 + [f"/{unique}"]
    assert not Path(f"/{unique}").exists() and not Path(f"/usr/{unique}").exists()
    assert (root / unique).read_text() == "x\n"


def test_the_startup_script_runs_in_the_workers_root(emulator, emulator_server, unique) -> None:
    script = f"#!/bin/sh\nmkdir -p /var/log/{unique}\necho booted > /var/log/{unique}/boot\n"
    vm = create(emulator, "bootbox", "v3-8", metadata={"startup-script": script})
    try:
        log = _root(emulator_server, vm) / "var/log" / unique / "boot"
        wait_until(log.exists, "the startup script to write", timeout=30)
        wait_until(lambda: log.read_text() == "booted\n", "its line")
        assert not Path(f"/var/log/{unique}").exists()
    finally:
        delete(emulator, vm.name)


def test_status_signals_and_hangup_come_through(
    emulator, emulator_server, node, tmp_path: Path
) -> None:
    made, key = node
    assert run(emulator, tmp_path, made, 0, "alice", key, "exit 130").exit_status == 130
    killed = run(emulator, tmp_path, made, 0, "alice", key, "kill -TERM $$")
    assert (killed.exit_status, killed.exit_signal[0]) == (-1, "TERM")
    home = Path(emulator_server.backend.worker_env(made.name, 0)["HOME"])

    async def main() -> tuple[int | None, bytes]:
        async with _connect(emulator, tmp_path, made, key) as conn:
            # a signal sent by the client reaches the command, which may handle it
            # (a background job of a script ignores SIGINT: the trap ends it)
            trapped = "trap 'kill $!; echo got-int; exit 7' INT; sleep 100 & echo ready; wait"
            proc = await conn.create_process(trapped, encoding=None)
            assert await proc.stdout.readline() == b"ready\n"
            proc.send_signal("INT")
            done = await proc.wait()
            # the client goes away: the command is hung up on
            hup = "trap 'touch \"$HOME/hung-up\"; exit 0' HUP; sleep 100 & echo ready; wait"
            proc = await conn.create_process(hup, encoding=None)
            assert await proc.stdout.readline() == b"ready\n"
        return done.exit_status, done.stdout

    status, out = asyncio.run(main())
    assert (status, out) == (7, b"got-int\n")
    wait_until((home / "hung-up").exists, "the command to be hung up on")


def test_a_terminal_session_has_its_controlling_terminal_in_the_sandbox(
    emulator, emulator_server, node, tmp_path: Path, unique: str
) -> None:
    made, key = node

    async def main() -> Any:
        async with _connect(emulator, tmp_path, made, key) as conn:
            command = f"touch /{unique}; exec 3</dev/tty && echo has-ctty; kill -HUP $$"
            return await conn.run(command, term_type="xterm", encoding=None)

    done = asyncio.run(main())
    assert b"has-ctty" in done.stdout
    assert done.exit_signal[0] == "HUP"
    assert not Path(f"/{unique}").exists() and (_root(emulator_server, made) / unique).exists()


def test_without_bwrap_commands_are_refused_unless_unconfined_is_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.conftest import Emulator

    monkeypatch.setenv(BWRAP_ENV, str(tmp_path / "no-bwrap-here"))
    assert Sandbox().warning() is not None and Sandbox(unconfined=True).warning() is not None
    pub, key = user_key(tmp_path)
    outcomes = []
    for unconfined in (False, True):
        server = EmulatorServer(port=0, state_dir=None, storage=False, unconfined=unconfined)
        server.start()
        try:
            control = Emulator(server.address)
            control.durations(create=0, hostkeys=0)
            script = "#!/bin/sh\necho booted\n"
            metadata = {"ssh-keys": f"alice:{pub}", "startup-script": script}
            vm = create(control, f"bare{int(unconfined)}", "v3-8", metadata=metadata)
            done = run(control, tmp_path, vm, 0, "alice", key, "echo ran")
            home = Path(server.backend.worker_env(vm.name, 0)["HOME"])
            log = home.parent / "startup-script.log"
            wait_until(lambda log=log: log.exists() and log.read_text(), "the startup log")
            outcomes.append((done.exit_status, done.stdout, done.stderr, log.read_text()))
            control.tpu_client().delete_node(name=vm.name).result()
        finally:
            server.stop()
    assert outcomes == [
        (127, b"", f"{REFUSAL}\n".encode(), f"{REFUSAL}\n"),
        (0, b"ran\n", b"", "booted\n"),
    ]


def test_a_worker_sees_only_its_own_processes_and_cannot_reach_the_machine(
    emulator, emulator_server, node, tmp_path: Path, unique: str
) -> None:
    """Root in a worker: no /proc/<pid>/root leads out of it (a PID namespace of the
    worker's own), and no capability to mount or make a device node; yet the processes
    one command leaves are there for the next (the agent, its job, a later `exec`)."""
    made, key = node
    if not emulator_server.backend.workers.sandbox.namespaced:
        pytest.fail("the emulator runs as root with bwrap here: workers must be namespaced")
    host = tmp_path / "host-side"
    host.mkdir()
    marker = emulator_server.backend.worker_env(made.name, 0)["TPUCTL_EMULATOR_WORKER"]
    left = run(
        emulator, tmp_path, made, 0, "alice", key,
        "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!",
    )  # fmt: skip
    pid = int(left.stdout.decode())
    attempt = (
        f"for r in /proc/[0-9]*/root; do echo x > $r{host}/{unique} 2>/dev/null; done; "
        f"ls /proc/*/root{host} 2>/dev/null; "
        "mknod /tmp/disk b 8 0 2>/dev/null && echo made-a-device; "
        "mount -t tmpfs none /mnt 2>/dev/null && echo mounted; "
        f"kill -0 {pid} && echo still-there; "
        "for e in /proc/[0-9]*/environ; do "
        f"tr '\\0' '\\n' < $e | grep -qx 'TPUCTL_EMULATOR_WORKER={marker}' || echo stranger; "
        "done 2>/dev/null"
    )
    done = run(emulator, tmp_path, made, 0, "alice", key, attempt)
    assert done.stdout.decode().split() == ["still-there"], done.stderr
    assert list(host.iterdir()) == []
