"""The emulator's workers stand for VMs of an image made on this machine: a VM's pip
honours its image's settings, so a worker's pip has those of the shell that started the
emulator (PIP_INDEX_URL, ...); nothing else of that shell does (a credential, a virtualenv,
its PATH: emulator/workers/guest_env.py), and a client's own environment does not reach a
worker (but for LANG and LC_*, as OpenSSH's AcceptEnv)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tpuctl.emulator.core.ports import free_port

PIP = {
    "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
    "PIP_EXTRA_INDEX_URL": "http://127.0.0.1:9/extra/simple",
    "PIP_TRUSTED_HOST": "127.0.0.1",
}
# what a worker's python3 is, and what it sees of a folder
LOOK = "import os, sys; print(sys.prefix == sys.base_prefix, sys.prefix, os.listdir(sys.argv[1]))"


def tpuctl(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tpuctl", *args],
        env=env, capture_output=True, text=True, timeout=120, check=False,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_a_worker_has_the_pip_settings_of_the_shell_that_started_the_emulator(
    isolated_env: Path, tmp_path: Path
) -> None:
    port, state = free_port(), tmp_path / "emu"
    shell = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    started = dict(shell, **PIP, AWS_SECRET_ACCESS_KEY="shh", PYTHONPATH="/laptop/lib")
    wheels = tmp_path / "wheels"  # a wheel folder of this machine's, and one it has not
    (wheels / "sub").mkdir(parents=True)
    (wheels / "demo-1.0-py3-none-any.whl").write_bytes(b"")
    links = f"{wheels} http://127.0.0.1:9/links"
    started["PIP_FIND_LINKS"] = f"{tmp_path / 'no-such-wheels'} {links}"
    started["PATH"] = f"/laptop/bin{os.pathsep}{shell['PATH']}"
    laptop = dict(shell, TPUCTL_EMULATOR_HOST=f"127.0.0.1:{port}", LAPTOP_ONLY="1",
                  PIP_INDEX_URL="http://127.0.0.1:8/the-laptop-s/simple")  # fmt: skip
    flags = ["--port", str(port), "--state-dir", str(state)]
    up = tpuctl(started, "emulator", "start", "--detach", *flags)
    try:
        assert up.returncode == 0, up.stderr
        made = tpuctl(laptop, "create", "n1", "-a", "v3-8", "--zone", "us-central1-a")
        assert made.returncode == 0, made.stderr
        try:
            r = tpuctl(laptop, "exec", "n1", "--zone", "us-central1-a", "--", "env")
            assert r.returncode == 0, r.stderr
            seen = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
            assert {k: seen.get(k) for k in PIP} == PIP  # the emulator's, not the laptop's
            assert "LAPTOP_ONLY" not in seen
            assert "AWS_SECRET_ACCESS_KEY" not in seen  # the emulator's shell's, not a VM's
            assert "/laptop" not in seen["PATH"] and "/laptop" not in seen.get("PYTHONPATH", "")
            assert seen["PATH"].endswith("/usr/sbin:/usr/bin:/sbin:/bin:/snap/bin")
            assert seen["PIP_FIND_LINKS"] == links  # the missing folder left out
            assert not {k for k in seen if k.startswith("PIP_")} - set(PIP) - {"PIP_FIND_LINKS"}
            py = tpuctl(
                laptop,
                "exec",
                "n1",
                "--zone",
                "us-central1-a",
                "--",
                "python3",
                "-c",
                LOOK,
                str(wheels),
            )
            assert py.returncode == 0, py.stderr
            image, prefix, listed = py.stdout.split(" ", 2)
            # a system Python, not the emulator's (or the laptop's) virtualenv
            assert image == "True" and prefix != sys.prefix, py.stdout
            assert "demo-1.0-py3-none-any.whl" in listed  # the wheel folder is seen
        finally:
            gone = tpuctl(laptop, "delete", "n1", "--zone", "us-central1-a", "--yes")
            assert gone.returncode == 0, gone.stderr
    finally:
        down = tpuctl(shell, "emulator", "stop", "--state-dir", str(state))
        assert down.returncode == 0, down.stderr
