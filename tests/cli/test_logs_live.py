"""`tpuctl logs -f` follows a running job's log on the VMs, not the bucket's copy."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.cli.test_run import bucket_objects, wait_for
from tpuctl.services.run import agents

# Each worker says "ping", then waits for ~/go before "pong".
SCRIPT = """\
import os, time
w = os.environ["TPUCTL_WORKER_ID"]
print("ping from", w, flush=True)
while not os.path.exists(os.path.expanduser("~/go")):
    time.sleep(0.05)
print("pong from", w, flush=True)
"""


def test_logs_follow_prints_what_the_vms_write_before_the_bucket_has_it(
    cli, emulator_server, emulator, tmp_path: Path, monkeypatch
) -> None:
    # The agents upload their logs every 20 s (not 2): within that, only a live follower
    # sees "ping" (the test checks that the bucket has no log yet when it does).
    monkeypatch.setattr(agents, "HEARTBEAT", 20)
    (tmp_path / "job").mkdir()
    script = tmp_path / "job" / "pingpong.py"
    script.write_text(SCRIPT)
    r = cli("run", str(script), "-a", "v4-16", "-z", "us-central2-b", "--detach", "--json")
    assert r.code == 0, r.err
    job, node = json.loads(r.out)["job"], json.loads(r.out)["node"]
    proc, lines = follower(job)
    try:
        seen = _until(lines, {"[w0] ping from 0\n", "[w1] ping from 1\n"})
        assert not any(k.endswith(".log") for k in bucket_objects(emulator))  # not from there
        full = f"projects/tpuctl-demo/locations/us-central2-b/nodes/{node}"
        for worker in (0, 1):
            home = Path(emulator_server.backend.worker_env(full, worker)["HOME"])
            (home / "go").touch()
        assert proc.wait(timeout=120) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    seen += _drain(lines)
    assert seen.count("[w0] ping from 0\n") == 1 and seen.count("[w1] ping from 1\n") == 1
    assert "[w0] pong from 0\n" in seen and "[w1] pong from 1\n" in seen
    assert any("tpuctl-agent: succeeded with exit status 0" in ln for ln in seen)
    wait_for(lambda: emulator.nodes() == [])


def follower(job: str) -> tuple[subprocess.Popen[str], queue.Queue[str]]:
    """`tpuctl logs JOB -f` in a process of its own, and the lines it prints as they come."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tpuctl", "logs", job, "-f"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in proc.stdout or []:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    return proc, lines


def _until(lines: queue.Queue[str], wanted: set[str], timeout: float = 90.0) -> list[str]:
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while not wanted <= set(seen):
        left = deadline - time.monotonic()
        assert left > 0, f"waited for {wanted - set(seen)}; saw {seen}"
        try:
            seen.append(lines.get(timeout=left))
        except queue.Empty:
            continue
    return seen


def _drain(lines: queue.Queue[str]) -> list[str]:
    out = []
    while True:
        try:
            out.append(lines.get(timeout=2.0))
        except queue.Empty:
            return out


def test_logs_follow_opens_no_session_on_a_node_the_record_names_falsely(cli, emulator) -> None:
    """The record naming a job's node is in the shared bucket: rewritten to name another
    node, it gets no key of the user's and no session, only a refusal (the bucket's copy
    is followed instead)."""
    import pytest

    from tpuctl.cloud.clients import ClientFactory
    from tpuctl.errors import TpuctlError
    from tpuctl.services import live_logs

    assert cli("create", "unrelated", "-a", "v3-8", "-z", "us-central1-a").code == 0
    full = "projects/tpuctl-demo/locations/us-central1-a/nodes/unrelated"
    before = dict(emulator.tpu_client().get_node(name=full).metadata)
    factory = ClientFactory()
    running = {0: {"worker": 0, "attempt": 1, "state": "RUNNING", "pid": 1, "log": "x"}}
    with pytest.raises(TpuctlError, match="node unrelated is not job 20261205-000000-abcdef"):
        live_logs._stream(
            factory.backends(),
            factory.ssh(),
            {"project": "tpuctl-demo", "zone": "us-central1-a", "node": "unrelated"},
            "20261205-000000-abcdef",
            running,
            {},
            lambda *_: None,
        )
    assert dict(emulator.tpu_client().get_node(name=full).metadata) == before  # no key added
    assert cli("delete", "unrelated", "-z", "us-central1-a", "--yes").code == 0
