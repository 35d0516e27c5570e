"""A job on an existing node (`run --node`) carries the node's `tpuctl-job` label, as a node
made for it does: `tpuctl stacks`, `profile` and `logs -f` reach it, the next job on the
node takes the label over, and its receipt names the node's type, not the run's default.
A status in the bucket forged to name another process group gets nothing of it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.cli.test_logs_live import _drain, _until, follower
from tests.cli.test_run import bucket_objects
from tpuctl.services.run import agents

pytestmark = pytest.mark.usefixtures("workers_have_jax")  # JAX runs on the workers

ZONE = "us-central1-a"
FULL = f"projects/tpuctl-demo/locations/{ZONE}/nodes/tools"
# A JAX job (CPU) that also starts a process of its own session: another process group
# of the VM, as another job's or the system's would be.
SCRIPT = """\
import os, subprocess, sys

home = os.path.expanduser("~")
other = subprocess.Popen(
    [sys.executable, "-I", "-c", "import time; time.sleep(300)"], start_new_session=True
)
with open(os.path.join(home, "other.pid"), "w") as f:
    f.write(str(other.pid))
os.environ["JAX_PLATFORMS"] = "cpu"
import jax
import jax.numpy as jnp


@jax.jit
def step(x):
    return jnp.tanh(x @ x)


x = jnp.ones((128, 128))
step(x).block_until_ready()
print("ready", flush=True)
while not os.path.exists(os.path.join(home, "go")):
    x = step(x).block_until_ready()
print("done", flush=True)
"""
# py-spy as the VM may have it: a dump that names the pid it was given (the last argument)
PY_SPY = """\
#!/bin/sh
for pid; do :; done
echo "Process $pid: (py-spy)"
echo "Thread $pid (idle): \\"MainThread\\""
"""


def _label(emulator) -> str:  # noqa: ANN001
    (node,) = [n for n in emulator.nodes() if n["name"] == FULL]
    return str((node.get("labels") or {}).get("tpuctl-job"))


@pytest.mark.long
def test_a_job_on_an_existing_node_is_reached_and_its_receipt_names_the_node(
    cli, emulator_server, emulator, tmp_path: Path, monkeypatch
) -> None:
    # the agents write their status every 20 s: a status forged between two writes stays
    # (what the follower shows comes from the VM)
    monkeypatch.setattr(agents, "HEARTBEAT", 20)
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "main.py").write_text(SCRIPT)
    (tmp_path / "job2").mkdir()
    (tmp_path / "job2" / "quick.py").write_text("print('quick')\n")
    assert cli("create", "tools", "-a", "v5litepod-1", "-z", ZONE).code == 0
    env = emulator_server.backend.worker_env(FULL, 0)
    home = Path(env["HOME"])
    try:
        flags = ["--node", "tools", "-z", ZONE, "--detach", "--json", "--no-outputs"]
        r = cli("run", str(tmp_path / "job" / "main.py"), *flags)
        assert r.code == 0, r.err
        job = json.loads(r.out)["job"]
        assert _label(emulator) == job
        follow, lines = follower(job)
        try:
            seen = _until(lines, {"ready\n"}, timeout=180)

            stacks = cli("stacks", job)
            assert stacks.code == 0, stacks.err
            assert 'File "main.py", line ' in stacks.out, stacks.out

            took = cli("profile", job, "--seconds", "1", "--dest", str(tmp_path / "p"), "--json")
            assert took.code == 0, took.err
            assert [t["worker"] for t in json.loads(took.out)["traces"]] == [0]

            # py-spy on the VM, and the status names another process group
            other = int((home / "other.pid").read_text())
            tool = Path(env["PATH"].split(os.pathsep)[0]) / "py-spy"
            tool.parent.mkdir(parents=True, exist_ok=True)
            tool.write_text(PY_SPY)
            tool.chmod(0o755)
            name = f"tpuctl/jobs/{job}/status/worker-0.json"
            status = json.loads(bucket_objects(emulator, lambda n: n == name)[name])
            assert status["child_pid"] != other
            blob = emulator.storage_client().bucket("tpuctl-demo-tpuctl").blob(name)
            for _ in range(3):  # until the agent's own write did not come in between
                blob.upload_from_string(json.dumps({**status, "child_pid": other}))
                generation = blob.generation
                forged = cli("stacks", job)
                blob.reload()
                if blob.generation == generation:
                    break
            assert forged.code == 0, forged.err
            # the job's own process, by py-spy, and not the other (shown without pids)
            assert "== process: python3 main.py\nProcess: (py-spy)" in forged.out
            assert "time.sleep(300)" not in forged.out, forged.out
            said = [ln for ln in forged.err.splitlines() if f"process group {other}" in ln]
            assert said == [
                f"w0: process group {other} was not started by job {job}'s agent: left "
                "alone (the job's status names it)"
            ], forged.err
            alive = cli("exec", "tools", "-z", ZONE, "--", "kill", "-0", str(other))
            assert alive.code == 0, alive.err

            (home / "go").touch()
            assert follow.wait(timeout=120) == 0
        finally:
            if follow.poll() is None:
                follow.kill()
                follow.wait()
        seen += _drain(lines)
        assert "done\n" in seen
        assert follow.stderr is not None
        assert "following the bucket's copy" not in follow.stderr.read()  # the VM's

        row = json.loads(cli("jobs", job, "--json").out)
        assert row["state"] == "SUCCEEDED"
        assert row["receipt"]["accelerator"] == "v5litepod-1"

        # the next job on the node: the label names it
        r = cli("run", str(tmp_path / "job2" / "quick.py"), "--node", "tools", "-z", ZONE, "--json")
        assert r.code == 0, r.err
        second = json.loads(r.out)
        assert _label(emulator) == second["job"] != job
        assert second["receipt"]["accelerator"] == "v5litepod-1"
        assert " in us-central1 (v5litepod-1)" in r.err  # the price it was costed at
    finally:
        assert cli("delete", "tools", "-z", ZONE, "--yes").code == 0
