"""tpuctl's own SSH client against a real OpenSSH server, host keys checked strictly."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from tests.services.conftest import Sshd
from tpuctl.cloud.ssh import Endpoint, SshApi
from tpuctl.models import Node
from tpuctl.services import remote
from tpuctl.services.hostkeys import write_known_hosts
from tpuctl.services.ssh import Plan

NODE = Node(name="n1", project="p", zone="us-central1-a", accelerator_type="v3-8", state="READY")


def plan_for(sshd: Sshd, tmp_path: Path, host_key: str | None = None) -> tuple[SshApi, Plan]:
    ssh = SshApi(sshd.port)
    endpoint = ssh.endpoint(0, "127.0.0.1")
    kind, value = (host_key or sshd.host_public_key).split()[:2]
    known_hosts = tmp_path / "known_hosts"
    write_known_hosts(known_hosts, NODE, [endpoint], {0: [(kind, value)]})
    return ssh, Plan(NODE, sshd.user, sshd.key, known_hosts, [endpoint])


def collect(plan: Plan, ssh: SshApi, command: str) -> tuple[list[remote.WorkerResult], dict]:
    out: dict[str, bytes] = {"stdout": b"", "stderr": b""}

    def output(worker: int, stream: str, data: bytes) -> None:
        out[stream] += data

    return remote.run_command(ssh, plan, command, output, connect_timeout=5), out


def test_runs_a_command_with_exact_arguments_and_status(sshd: Sshd, tmp_path: Path) -> None:
    ssh, plan = plan_for(sshd, tmp_path)
    args = ["a b", "it's", '"q"', "$(echo no)", "x;y", "back\\slash", "*"]
    command = shlex.join(["printf", "%s\\n", *args]) + "; echo err >&2; exit 3"
    results, out = collect(plan, ssh, command)
    assert [(r.worker, r.status, r.error) for r in results] == [(0, 3, None)]
    assert out["stdout"].decode().splitlines() == args
    assert out["stderr"] == b"err\n"


def test_copies_files_both_ways(sshd: Sshd, tmp_path: Path) -> None:
    ssh, plan = plan_for(sshd, tmp_path)
    source = tmp_path / "src"
    (source / "sub").mkdir(parents=True)
    (source / "a b.txt").write_text("spaces\n")
    (source / "sub" / "c").write_bytes(bytes(range(256)))
    remote_dir = tmp_path / "on-server"
    [put] = remote.copy_to(ssh, plan, [source], f"{remote_dir}/", recurse=True)
    assert (put.status, put.error) == (0, None)
    assert (remote_dir / "src" / "a b.txt").read_text() == "spaces\n"
    back = tmp_path / "back"
    back.mkdir()
    [got] = remote.copy_from(ssh, plan, [str(remote_dir / "src")], lambda w: back, recurse=True)
    assert (got.status, got.error) == (0, None)
    assert (back / "src" / "sub" / "c").read_bytes() == bytes(range(256))


def test_a_host_key_other_than_the_published_one_is_refused(sshd: Sshd, tmp_path: Path) -> None:
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    ssh, plan = plan_for(sshd, tmp_path, host_key=Path(f"{other}.pub").read_text())
    results, out = collect(plan, ssh, "echo should-not-run")
    [result] = results
    assert result.host_key_refused and result.status == 255
    assert "presented an SSH host key that is not the one the cloud publishes" in str(result.error)
    assert out["stdout"] == b""


def test_a_worker_nobody_answers_for_is_reported_by_name(sshd: Sshd, tmp_path: Path) -> None:
    ssh, plan = plan_for(sshd, tmp_path)
    dead = Endpoint(1, "127.0.0.1", sshd.port + 1 if sshd.port < 65535 else sshd.port - 1)
    plan.endpoints.append(dead)
    kind, value = sshd.host_public_key.split()
    write_known_hosts(plan.known_hosts, NODE, [dead], {1: [(kind, value)]})
    out: list[tuple[int, bytes]] = []
    results = remote.run_command(
        ssh, plan, "echo up", lambda w, s, d: out.append((w, d)), connect_timeout=0.5
    )
    assert [(r.worker, r.status) for r in results] == [(0, 0), (1, 255)]
    assert f"worker 1 (127.0.0.1:{dead.port})" in str(results[1].error)
    assert remote.exit_status(results) == 255
    summary = remote.failure_summary(results)
    assert summary is not None and summary.startswith("failed on 1 of 2 workers:\n  worker 1 ")
    assert out == [(0, b"up\n")]
