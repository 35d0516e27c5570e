"""Where a job's `--env` values go on the VM: into the script's environment, and nowhere
else (not the argv of any process, not the agent's own environment, not the VM's disk,
not the bucket); the job's key (the client's never reaches the VM) not even there; the
job's folder
on the VM is its user's alone. docs/security.md has the whole table."""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from tests.agent.conftest import CLIENT_KEY, Cluster
from tpuctl.agent import signing

LOOK = """\
import os, pathlib
value = os.environ["API_KEY"].encode()
shown = 0
for proc in pathlib.Path("/proc").iterdir():
    if proc.name.isdigit():
        try:
            shown += value in (proc / "cmdline").read_bytes()
        except OSError:
            pass
print("processes with the value in their argv:", shown)
agent = (pathlib.Path("/proc") / str(os.getppid()) / "environ").read_bytes()
print("the agent's own environment holds it:", value in agent)
print("the script got a value of", len(value), "characters")
print("its environment:", {k: v for k, v in os.environ.items() if k != "API_KEY"})
"""


def _files(root: Path) -> list[Path]:
    return [Path(d, f) for d, _, files in os.walk(root) for f in files]


def test_env_values_and_the_vm_token_reach_nothing_else(cluster: Cluster) -> None:
    node = cluster.create_node("secrets")
    job = cluster.stage({"train.py": LOOK}, node, env_names=["API_KEY"])
    value = "sk-" + secrets.token_hex(16)
    worker = cluster.worker(node, 0)
    done = worker.run(job, cluster.bucket.name, env_values={"API_KEY": value})
    assert done.returncode == 0, done.stderr
    log = cluster.text(f"tpuctl/jobs/{job}/logs/attempt-1/worker-0.log")
    assert f"the script got a value of {len(value)} characters" in log
    assert "processes with the value in their argv: 0" in log  # `ps` never shows it
    assert "the agent's own environment holds it: False" in log  # only the script's has it
    assert "its environment: {" in log  # printed whole: the job's key is not in it (below)
    # the VM's disk (the copies of the request and record, logs, statuses) and the
    # bucket hold neither the value nor any access token (Google's, as the emulator's
    # metadata server mints them, start `ya29.`): the agent's token stays in its memory
    assert "GET metadata.token" in cluster.emulator.requests()
    job_key = signing.job_key(CLIENT_KEY, job)  # the agent's alone
    for secret in (value.encode(), b"ya29.", job_key.encode(), CLIENT_KEY.encode()):
        assert not [p for p in _files(worker.root.parent) if secret in p.read_bytes()]
        in_bucket = [o.name for o in cluster.bucket.objects("tpuctl/")
                     if secret in cluster.bucket.read_bytes(o.name, 1 << 30)[0]]  # fmt: skip
        assert in_bucket == []
    folder = worker.root / "jobs" / job
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700  # no other user of the VM reads it
