"""The agent bundle: stdlib-only Python 3.8 modules in one zipapp, installed atomically
under a name of its content, run as the VM runs it."""

from __future__ import annotations

import ast
import hashlib
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.agent.conftest import AGENT_PYTHON
from tpuctl.agent import bundle

AGENT_DIR = Path(bundle.__file__).parent


@pytest.mark.parametrize("path", sorted(AGENT_DIR.glob("*.py")), ids=lambda p: p.name)
def test_the_agent_modules_are_stdlib_only_python38(path: Path) -> None:
    tree = ast.parse(path.read_text(), feature_version=(3, 8))
    modules, siblings = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level:
            assert node.level == 1, "a relative import beyond tpuctl/agent"
            siblings |= {node.module} if node.module else {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            modules.add((node.module or "").split(".")[0])
    assert modules <= set(sys.stdlib_module_names) | {"__future__"}, modules
    assert "tpuctl" not in modules
    assert all((AGENT_DIR / f"{name}.py").is_file() for name in siblings), siblings


def test_the_bundle_holds_the_agent_modules_and_is_built_the_same_way_twice() -> None:
    data = bundle.build()
    names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    shipped = {p.name for p in AGENT_DIR.glob("*.py")} - {"bundle.py"}
    assert sorted(names) == sorted(["__main__.py", *(f"tpuctl_agent/{n}" for n in shipped)])
    bundle.build.cache_clear()
    assert bundle.build() == data  # deterministic: the name stays the same
    digest = hashlib.sha256(data).hexdigest()
    assert bundle.file_name() == f"tpuctl-agent-{digest[:12]}.pyz"
    assert bundle.remote_path() == f"~/.tpuctl/tpuctl-agent-{digest[:12]}.pyz"


def test_commands_quote_their_arguments_but_leave_the_tilde_to_the_shell() -> None:
    command = bundle.command("follow", "/a b/log", "0", "42")
    assert command == f"python3 ~/.tpuctl/{bundle.file_name()} follow '/a b/log' 0 42"


def test_the_bundle_runs_on_the_standard_library_alone(tmp_path: Path) -> None:
    path = tmp_path / bundle.file_name()
    path.write_bytes(bundle.build())
    # -I: no environment, no user site, no script dir; -S: no site-packages at all
    run = [AGENT_PYTHON, "-I", "-S", str(path)]
    check = subprocess.run([*run, "idle", "check"], capture_output=True, text=True, check=True,
                           cwd=tmp_path, env={"TPUCTL_IDLE_SCOPE": "NOBODY=0"})  # fmt: skip
    result = json.loads(check.stdout)
    assert result["busy"] is False and result["reasons"] == []
    for program in ("agent", "idle"):
        done = subprocess.run([*run, program, "--help"], capture_output=True, text=True)
        assert done.returncode == 0 and "usage:" in done.stdout, done.stderr
    log = tmp_path / "log"
    log.write_bytes(b"one\ntwo\n")
    followed = subprocess.run([*run, "follow", str(log), "4", "999999999"], capture_output=True)
    assert followed.stdout == b"two\n"  # no such pid: print from the offset to the end
    assert subprocess.run([*run], capture_output=True).returncode == 2


def test_the_bundle_runs_from_its_package_extracted_once_beside_it(tmp_path: Path) -> None:
    """Python caches the compiled modules in the extracted folder; from the zip, every
    process compiled them from source again. A bundle not under its own name (the
    install's check of a temporary file) extracts nothing."""
    path = tmp_path / bundle.file_name()
    path.write_bytes(bundle.build())
    for _ in range(2):
        done = subprocess.run([AGENT_PYTHON, "-I", "-S", str(path), "idle", "--help"],
                              capture_output=True, text=True)  # fmt: skip
        assert done.returncode == 0 and "usage:" in done.stdout, done.stderr
    package = tmp_path / path.name.replace(".pyz", ".d") / "tpuctl_agent"
    shipped = [n for n in zipfile.ZipFile(path).namelist() if n.startswith("tpuctl_agent/")]
    assert sorted(f"tpuctl_agent/{p.name}" for p in package.glob("*.py")) == sorted(shipped)
    assert list((package / "__pycache__").glob("idle.*.pyc"))  # compiled once, kept
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([path.name, package.parent.name])
    hidden = tmp_path / "check" / f".{path.name}.123"
    hidden.parent.mkdir()
    hidden.write_bytes(bundle.build())
    digest = hashlib.sha256(bundle.build()).hexdigest()
    assert subprocess.run([AGENT_PYTHON, "-I", str(hidden), "verify", digest]).returncode == 0
    assert [p.name for p in hidden.parent.iterdir()] == [hidden.name]


def _install(home: Path, data: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["/bin/sh", "-c", bundle.install_command()], input=data,
                          env={"HOME": str(home), "PATH": str(Path(AGENT_PYTHON).parent) +
                               ":/usr/bin:/bin"}, capture_output=True)  # fmt: skip


def test_the_install_is_atomic_checked_and_idempotent(tmp_path: Path) -> None:
    data = bundle.build()
    installed = tmp_path / bundle.remote_path().removeprefix("~/")
    assert _install(tmp_path, data[:-100]).returncode != 0  # a cut upload
    assert not installed.parent.exists() or list(installed.parent.iterdir()) == []
    for _ in range(2):
        assert _install(tmp_path, data).returncode == 0
        assert [p.name for p in installed.parent.iterdir()] == [installed.name]
        assert installed.read_bytes() == data
