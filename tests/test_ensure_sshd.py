"""scripts/ensure-sshd: `make test` on a machine without OpenSSH says what to install."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "ensure-sshd"


def _bin(tmp_path: Path, *tools: str) -> Path:
    """A PATH dir holding only these real tools, and an `id` that says we are not root."""
    d = tmp_path / "bin"
    d.mkdir()
    for tool in tools:
        found = shutil.which(tool)
        assert found, tool
        (d / tool).symlink_to(found)
    (d / "id").write_text("#!/bin/sh\necho 1000\n")
    (d / "id").chmod(0o755)
    return d


def test_without_openssh_or_a_way_to_install_it_one_line_says_what_to_install(tmp_path):
    path = _bin(tmp_path, "bash", "cat")  # no ssh, no sshd, no apt-get, no sudo
    r = subprocess.run(
        ["/bin/bash", str(SCRIPT)],
        env={**os.environ, "PATH": str(path)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "sudo apt-get install openssh-client openssh-server" in lines[0]


def test_with_openssh_it_is_silent(tmp_path):
    r = subprocess.run(["/bin/bash", str(SCRIPT)], capture_output=True, text=True, check=False)
    assert (r.returncode, r.stderr) == (0, "")
