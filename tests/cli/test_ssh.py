"""tpuctl ssh / exec / scp against emulated single-host and multi-host nodes."""

from __future__ import annotations

import asyncio
import ipaddress
import os
import secrets
import shlex
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.cli.conftest import one_line_error
from tests.emulator.ssh_helpers import Sshd, host_key_pair, mine, run_sshd, wait_until
from tpuctl.cloud.ssh import Endpoint, SshApi
from tpuctl.errors import HostKeyMismatch
from tpuctl.services import ssh as ssh_service

POD = ("-z", "us-central2-b")
TRICKY = ["a b", "it's", '"double"', "$(echo no)", "x;y", "`id`", "*", "back\\slash", ""]


@pytest.fixture(autouse=True)
def no_process_left(emulator_server: Any) -> Any:
    yield
    procs = mine(emulator_server)  # this session's: other suites may share the machine
    wait_until(lambda: not procs(), "the workers' processes to be gone")


@pytest.fixture
def pod(cli) -> Any:
    """A READY v4-32: four workers."""
    assert cli("create", "pod", "-a", "v4-32", *POD).code == 0
    yield "pod"
    assert cli("delete", "pod", *POD, "--yes").code == 0


@pytest.fixture
def vm(cli) -> Any:
    """A READY single-host v3-8 in the default zone."""
    assert cli("create", "vm", "-a", "v3-8").code == 0
    yield "vm"
    assert cli("delete", "vm", "--yes", "--missing-ok").code == 0


def test_a_command_on_every_worker_is_attributed_and_combined(cli, pod) -> None:
    script = 'echo "out $TPU_WORKER_ID"; echo "err $TPU_WORKER_ID" >&2; exit $((TPU_WORKER_ID % 3))'
    r = cli("exec", pod, *POD, "--", "sh", "-c", script)
    assert sorted(r.out.splitlines()) == [f"[w{k}] out {k}" for k in range(4)]
    assert sorted(ln for ln in r.err.splitlines() if ln.startswith("[w")) == [
        f"[w{k}] err {k}" for k in range(4)
    ]
    assert r.code == 1  # the first non-zero status in worker order: w1 exits 1, w2 exits 2
    assert "failed on 2 of 4 workers:\n  worker 1: exit status 1\n  worker 2: exit status 2\n" in (
        r.err
    )


def test_all_succeeding_workers_exit_zero_and_say_nothing(cli, pod) -> None:
    r = cli("ssh", pod, *POD, "--worker", "1-3", "--command", "echo $TPU_WORKER_ID")
    assert (r.code, sorted(r.out.splitlines()), r.err) == (0, ["[w1] 1", "[w2] 2", "[w3] 3"], "")


def test_arguments_reach_the_vm_exactly(cli, pod) -> None:
    r = cli("exec", pod, *POD, "--worker", "0,3", "--", "printf", "<%s>\\n", *TRICKY)
    assert r.code == 0, r.err
    for k in (0, 3):
        assert [ln for ln in r.out.splitlines() if ln.startswith(f"[w{k}] ")] == [
            f"[w{k}] <{arg}>" for arg in TRICKY
        ]


def test_one_worker_prints_raw_output_and_output_dir_keeps_files(cli, pod, tmp_path) -> None:
    r = cli("ssh", pod, *POD, "--command", "printf 'no newline'; exit 4")
    assert (r.code, r.out) == (4, "no newline")
    out = tmp_path / "logs"
    r = cli("exec", pod, *POD, "--output-dir", str(out), "--", "sh", "-c", "echo $TPU_WORKER_ID")
    assert r.code == 0 and r.out == ""
    assert {p.name: p.read_text() for p in out.iterdir()} == {
        f"w{k}.log": f"{k}\n" for k in range(4)
    }


def test_scp_reaches_every_worker_and_brings_files_back(cli, pod, tmp_path: Path) -> None:
    src = tmp_path / "code"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "it's a file.py").write_text("print('hi')\n")
    (tmp_path / "train.py").write_text("x = 1\n")
    r = cli("scp", "-r", str(src), str(tmp_path / "train.py"), f"{pod}:work/", *POD)
    assert r.code == 0, r.err
    r = cli("exec", pod, *POD, "--", "cat", "work/code/pkg/it's a file.py", "work/train.py")
    assert sorted(r.out.splitlines()) == sorted(
        f"[w{k}] {line}" for k in range(4) for line in ("print('hi')", "x = 1")
    )
    back = tmp_path / "back"
    r = cli("scp", f"{pod}:~/work/train.py", str(back), "--worker", "1,2", *POD)
    assert r.code == 0, r.err
    assert sorted(str(p.relative_to(back)) for p in back.rglob("*.py")) == [
        "w1/train.py",
        "w2/train.py",
    ]
    missing = cli("scp", f"{pod}:nothere", str(tmp_path / "x"), "--worker", "3", *POD)
    assert missing.code == 1
    assert "failed on 1 of 1 workers:\n  worker 3 (" in missing.err
    assert "No such file" in missing.err


def test_refusals_say_why(cli, pod, vm) -> None:
    r = cli("ssh", pod, *POD, "--worker", "7", "--command", "true")
    assert r.code == 2
    assert one_line_error(r) == "error: node pod has 4 workers (0-3): there is no worker 7"
    r = cli("ssh", pod, *POD, "--worker", "all")
    assert r.code == 1 and "an interactive shell needs one worker, not 4" in one_line_error(r)
    assert cli("stop", vm).code == 0
    r = cli("ssh", vm, "--command", "true")
    assert r.code == 2
    assert one_line_error(r) == (
        "error: TPU vm has state STOPPED, so it cannot be currently connected to"
    )
    assert "hint: start it with `tpuctl start vm`" in r.err


def test_scp_to_an_absolute_path_lands_in_the_workers_root(
    cli, emulator, emulator_server, tmp_path: Path
) -> None:
    """Not at the root of this machine (issue 17): the worker has a root of its own."""
    unique = f"tpuctl-scp-test-{secrets.token_hex(6)}"
    assert cli("create", "scpbox", "-a", "v3-8").code == 0
    try:
        job = tmp_path / "job.py"
        job.write_text("print('boxed')\n")
        r = cli("scp", str(job), f"scpbox:/{unique}/x/")
        assert r.code == 0, r.err
        assert not Path(f"/{unique}").exists()
        name = emulator.nodes()[0]["name"]
        root = Path(emulator_server.backend.worker_env(name, 0)["HOME"]).parent / "root"
        assert (root / unique / "x" / "job.py").read_text() == "print('boxed')\n"
        # the worker's commands see it where it was sent
        r = cli("exec", "scpbox", "--", "python3", f"/{unique}/x/job.py")
        assert (r.code, r.out) == (0, "boxed\n"), r.err
    finally:
        shutil.rmtree(f"/{unique}", ignore_errors=True)  # had it gone wrong
        assert cli("delete", "scpbox", "--yes").code == 0


def test_internal_only_nodes_need_internal_ip(cli) -> None:
    assert cli("create", "inner", "-a", "v3-8", "--internal-ip-only").code == 0
    try:
        r = cli("ssh", "inner", "--command", "true")
        assert r.code == 2
        assert "worker 0 of inner has no external IP address" in one_line_error(r)
        assert "--internal-ip" in r.err
        r = cli("ssh", "inner", "--internal-ip", "--command", "echo inside")
        assert (r.code, r.out) == (0, "inside\n")
    finally:
        assert cli("delete", "inner", "--yes").code == 0


def test_a_connection_dropped_mid_command_names_the_worker(cli, emulator, emulator_server) -> None:
    assert cli("create", "spot", "-a", "v3-8", "--spot").code == 0
    result: list[Any] = []
    runner = threading.Thread(
        target=lambda: result.append(cli("ssh", "spot", "--command", "echo started; sleep 60"))
    )
    runner.start()
    try:
        wait_until(mine(emulator_server), "the command to start")
        emulator.preempt("projects/tpuctl-demo/locations/us-central1-a/nodes/spot")
        runner.join(timeout=30)
        [r] = result
        assert r.code == 255
        assert "failed on 1 of 1 workers:\n  worker 0 (" in r.err
        assert "connection lost" in r.err
    finally:
        runner.join(timeout=30)
        assert cli("delete", "spot", "--yes").code == 0


def test_create_wait_ssh_and_dry_run(cli, tmp_path: Path) -> None:
    r = cli("create", "fresh", "-a", "v4-16", *POD, "--wait-ssh")
    try:
        assert r.code == 0, r.err
        dry = cli("ssh", "fresh", *POD, "--worker", "1", "--dry-run", "--", "-L", "8888:x:8888")
        argv = shlex.split(dry.out)
        assert argv[0] == "ssh" and argv[-2:] == ["-L", "8888:x:8888"]
        assert "StrictHostKeyChecking=yes" in argv and "IdentitiesOnly=yes" in argv
        known = next(a for a in argv if a.startswith("UserKnownHostsFile="))
        assert Path(known.split("=", 1)[1]).is_file()
        assert ipaddress.ip_address(argv[-3]) in ipaddress.ip_network("127.64.0.0/10")
    finally:
        assert cli("delete", "fresh", *POD, "--yes").code == 0


def test_interactive_shell_through_a_terminal(cli, vm) -> None:
    child = pexpect.spawn(
        sys.executable,
        ["-m", "tpuctl", "ssh", vm, "--", "-F", "/dev/null"],
        env=dict(os.environ),
        encoding="utf-8",
        timeout=30,
        dimensions=(30, 100),
    )
    try:
        child.expect(r"[#$] ")
        child.sendline("echo worker=$TPU_WORKER_ID sum=$((40+2)); stty size")
        child.expect("worker=0 sum=42")
        child.expect("30 100")
        child.sendline("exit 3")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 3


def test_help_shows_examples(cli) -> None:
    for command in ("ssh", "exec", "scp"):
        r = cli(command, "--help")
        assert r.code == 0 and "Example: tpuctl" in r.out, command


def test_openssh_is_what_the_shell_runs(cli, vm) -> None:
    dry = cli("ssh", vm, "--dry-run")
    argv = shlex.split(dry.out)
    r = subprocess.run(
        [*argv, "-F", "/dev/null", "-o", "BatchMode=yes", "echo via-openssh"],
        capture_output=True,
        text=True,
    )
    assert (r.returncode, r.stdout) == (0, "via-openssh\n"), r.stderr


def _connects(sshd: Sshd, known_hosts: Path) -> tuple[bool, bool]:
    """(OpenSSH accepts the server, tpuctl's asyncssh client accepts it), with `known_hosts`
    as the only trust and tpuctl's key (which the server lets in) as the identity."""
    key = ssh_service.key_path()
    openssh = subprocess.run(
        ["ssh", "-F", "/dev/null", "-i", str(key), "-l", sshd.user, "-p", str(sshd.port),
         "-o", f"UserKnownHostsFile={known_hosts}", "-o", "GlobalKnownHostsFile=/dev/null",
         "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "CheckHostIP=no",
         sshd.address, "echo in"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert openssh.returncode == 0 or "Host key verification failed" in openssh.stderr, (
        openssh.stderr
    )

    async def asyncssh_client() -> bool:
        ep = Endpoint(0, sshd.address, sshd.port)
        try:
            async with SshApi(sshd.port).session(ep, sshd.user, key, known_hosts, timeout=10):
                return True
        except HostKeyMismatch:
            return False

    return openssh.returncode == 0, asyncio.run(asyncssh_client())


def test_a_crafted_host_key_attribute_plants_no_line_and_lets_nobody_in(
    cli, emulator, vm, tmp_path: Path
) -> None:
    full = f"projects/tpuctl-demo/locations/us-central1-a/nodes/{vm}"
    known = ssh_service.known_hosts_path()
    known.parent.mkdir(parents=True, exist_ok=True)
    # what an older tpuctl left behind after meeting such a node: healed by the next write
    known.write_text("* ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPlanted tpuctl:p/z/old/w0\n")
    assert cli("exec", vm, "--", "true").code == 0
    lines = known.read_text().splitlines()
    # one line per key the worker publishes: Ed25519, ECDSA and RSA, as TPU VMs do
    kinds = ["ssh-ed25519", "ecdsa-sha2-nistp256", "ssh-rsa"]
    assert [entry.split()[1] for entry in lines] == kinds
    line, good_ecdsa = lines[0], lines[1].split()[2]
    address, kind, good = line.split()[:3]
    host = address[1:].split("]")[0]  # [HOST]:PORT, the emulator's port not being 22
    assert ipaddress.ip_address(host) in ipaddress.ip_network("127.64.0.0/10")
    other_key = tmp_path / "other_host_key"
    other = host_key_pair(other_key)
    for value in (f"{good}\n* {other}", f"{good}\n{other}", f"{good} * {other}"):
        crafted = [{"namespace": "hostkeys", "key": k, "value": value} for k in kinds]
        emulator.set_guest_attributes(full, 0, crafted)
        r = cli("exec", vm, "--", "echo", "should-not-run")
        assert r.code == 1 and r.out == ""
        assert one_line_error(r) == (
            f"error: worker 0 of {vm} publishes no well-formed SSH host key "
            "(hostkeys/ssh-ed25519: not one base64 key): refused"
        )
        assert known.read_text().splitlines() == lines
    # an injected attribute beside good keys is left out; the good keys are trusted
    emulator.set_guest_attributes(
        full,
        0,
        [
            {"namespace": "hostkeys", "key": "ssh-ed25519", "value": good},
            {"namespace": "hostkeys", "key": "ecdsa-sha2-nistp256", "value": good_ecdsa},
            {"namespace": "hostkeys", "key": "ssh-rsa", "value": f"{good}\n* {other}"},
            {"namespace": "hostkeys", "key": f"ssh-ed25519 {good}\n*", "value": good},
        ],
    )
    assert cli("exec", vm, "--", "true").code == 0
    assert known.read_text().splitlines() == lines[:2]
    # a server holding the other key on another loopback address is trusted by no client
    with run_sshd(tmp_path, "127.0.0.2", other_key, ssh_service.key_path()) as fake:
        assert _connects(fake, known) == (False, False)
