"""scripts/ensure-tools: `make test` on a machine without OpenSSH or bubblewrap says what
to install, in one line."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "ensure-tools"


def _bin(tmp_path: Path, *tools: str) -> Path:
    """A PATH dir holding only these real tools, and an `id` that says we are not root."""
    d = tmp_path / "bin"
    d.mkdir()
    for tool in tools:
        found = shutil.which(tool) or (f"/usr/sbin/{tool}" if tool == "sshd" else None)
        assert found, tool
        (d / tool).symlink_to(found)
    (d / "id").write_text("#!/bin/sh\necho 1000\n")
    (d / "id").chmod(0o755)
    return d


def _ensure(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/bash", str(SCRIPT)],
        env={**os.environ, "PATH": str(path)},
        capture_output=True,
        text=True,
        check=False,
    )


def test_without_the_tools_or_a_way_to_install_them_one_line_says_what_to_install(tmp_path):
    r = _ensure(_bin(tmp_path, "bash", "cat"))  # no ssh, no bwrap, no apt-get, no sudo
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1
    # sshd is looked for in /usr/sbin too, where Debian puts it (outside a user's PATH)
    server = [] if os.access("/usr/sbin/sshd", os.X_OK) else ["openssh-server"]
    need = " ".join(["openssh-client", *server, "bubblewrap"])
    assert lines[0].startswith(f"make: needs {need} (")
    assert lines[0].endswith(f"install them, e.g. 'sudo apt-get install {need}'")


def test_without_bubblewrap_it_names_bubblewrap_alone(tmp_path):
    r = _ensure(_bin(tmp_path, "bash", "cat", "ssh", "sshd"))
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        "make: needs bubblewrap (OpenSSH for the SSH tests, bubblewrap for the emulator's "
        "workers); install them, e.g. 'sudo apt-get install bubblewrap'"
    ]


def test_with_the_tools_it_is_silent(tmp_path):
    r = subprocess.run(["/bin/bash", str(SCRIPT)], capture_output=True, text=True, check=False)
    assert (r.returncode, r.stderr) == (0, "")
