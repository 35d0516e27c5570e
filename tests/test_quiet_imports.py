"""A command that connects prints nothing of its libraries' own: asyncssh's DSA
deprecation warnings (five lines on every `run`, `ssh`, `exec`) are not shown."""

from __future__ import annotations

import subprocess
import sys


def test_the_ssh_client_imports_without_warnings() -> None:
    r = subprocess.run(
        [sys.executable, "-c", "import tpuctl.cloud.ssh"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert "DSA is deprecated" not in r.stderr
    assert r.stderr == ""
