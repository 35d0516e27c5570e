"""The agent bundle: stdlib-only Python 3.8 modules in one zipapp, installed atomically
under a name of its content, run as the VM runs it."""

from __future__ import annotations

import ast
import hashlib
import io
import json
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.agent.conftest import AGENT_PYTHON, checked
from tpuctl.agent import bundle

AGENT_DIR = Path(bundle.__file__).parent


@pytest.mark.parametrize(
    "path", sorted(AGENT_DIR.rglob("*.py")), ids=lambda p: str(p.relative_to(AGENT_DIR))
)
def test_the_agent_modules_are_stdlib_only_python38(path: Path) -> None:
    tree = ast.parse(path.read_text(), feature_version=(3, 8))
    modules, siblings = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level:
            depth = len(path.relative_to(AGENT_DIR).parts)  # targets/x.py: `..` is the agent
            assert node.level == depth, "a relative import beyond tpuctl/agent"
            siblings |= {node.module} if node.module else {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            modules.add((node.module or "").split(".")[0])
    assert modules <= set(sys.stdlib_module_names) | {"__future__"}, modules
    assert "tpuctl" not in modules
    assert all((AGENT_DIR / f"{name}.py").is_file() for name in siblings), siblings


def test_the_check_and_the_loader_are_python38() -> None:
    for text in (bundle.BOOTSTRAP, bundle.MAIN):
        ast.parse(text, feature_version=(3, 8))


def test_the_bundle_holds_the_agent_modules_and_is_built_the_same_way_twice() -> None:
    data = bundle.build()
    zf = zipfile.ZipFile(io.BytesIO(data))
    names = zf.namelist()
    shipped = {str(p.relative_to(AGENT_DIR)) for p in AGENT_DIR.rglob("*.py")} - {"bundle.py"}
    assert sorted(names) == sorted(["__main__.py", *(f"tpuctl_agent/{n}" for n in shipped)])
    first = zf.infolist()[0]  # where and as the check finds it
    assert first.filename == "__main__.py" and first.compress_type == zipfile.ZIP_STORED
    bundle._build.cache_clear()
    assert bundle.build() == data  # deterministic: the name stays the same
    digest = hashlib.sha256(data).hexdigest()
    assert bundle.file_name() == f"tpuctl-agent-{digest[:12]}.pyz"
    assert bundle.remote_path() == f"~/.tpuctl/tpuctl-agent-{digest[:12]}.pyz"


def test_commands_check_the_bundle_quote_their_arguments_and_leave_the_tilde_to_the_shell() -> None:
    command = bundle.command("follow", "/a b/log", "0", "42")
    assert command == (
        f"python3 -I -S -c {shlex.quote(bundle.BOOTSTRAP)} {bundle.sha256()} "
        f"~/.tpuctl/{bundle.file_name()} follow '/a b/log' 0 42"
    )


def _sh(command: str, home: Path, data: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    """`command` run by a shell as the runner's SSH session runs it, in `home`."""
    return subprocess.run(["/bin/sh", "-c", command], input=data, cwd=home,
                          env={"HOME": str(home), "PATH": str(Path(AGENT_PYTHON).parent) +
                               ":/usr/bin:/bin"}, capture_output=True)  # fmt: skip


def test_the_bundle_runs_on_the_standard_library_alone(tmp_path: Path) -> None:
    path = tmp_path / bundle.file_name()
    path.write_bytes(bundle.build())
    # -I: no environment, no user site, no script dir; -S: no site-packages at all
    idle = {"TPUCTL_IDLE_SCOPE": "NOBODY=0"}
    check = subprocess.run(checked(path, "idle", "check"), capture_output=True, text=True,
                           check=True, cwd=tmp_path, env=idle)  # fmt: skip
    result = json.loads(check.stdout)
    assert result["busy"] is False and result["reasons"] == []
    for program in ("agent", "idle"):
        done = subprocess.run(checked(path, program, "--help"), capture_output=True, text=True)
        assert done.returncode == 0 and "usage:" in done.stdout, done.stderr
    log = tmp_path / "log"
    log.write_bytes(b"one\ntwo\n")
    followed = subprocess.run(
        checked(path, "follow", str(log), "4", "999999999"), capture_output=True
    )
    assert followed.stdout == b"two\n"  # no such pid: print from the offset to the end
    assert subprocess.run(checked(path), capture_output=True).returncode == 2


def test_a_bundle_changed_on_the_vm_is_refused_with_one_line_and_none_of_it_runs(
    tmp_path: Path,
) -> None:
    installed = tmp_path / bundle.remote_path().removeprefix("~/")
    assert _sh(bundle.install_command(), tmp_path, bundle.build()).returncode == 0
    original = zipfile.ZipFile(installed)
    entries = [(info, original.read(info)) for info in original.infolist()]
    marker = tmp_path / "ran"
    with zipfile.ZipFile(installed, "w") as zf:  # every module, and __main__.py, now says so
        for info, data in entries:
            zf.writestr(info, data + f"\nopen({str(marker)!r}, 'a').write('ran')\n".encode())
    for program in (["idle", "check"], ["verify"], ["follow", "log", "0", "1"]):
        done = _sh(bundle.command(*program), tmp_path)
        assert done.returncode == bundle.REFUSED and done.stdout == b""
        (line,) = done.stderr.decode().splitlines()
        assert line.startswith(f"tpuctl-agent: refused: the agent bundle {installed} is not "
                               "the one this client sent: its sha256 is ")  # fmt: skip
        assert line.endswith("; it was changed on the VM (by a job?), so none of it runs")
    installed.unlink()
    done = _sh(bundle.command("verify"), tmp_path)
    assert done.returncode == bundle.REFUSED
    assert "it cannot be read (No such file or directory)" in done.stderr.decode()
    plain = tmp_path / "plain.pyz"  # run as a zipapp, unchecked: refused too
    plain.write_bytes(bundle.build())
    done = _sh(f"python3 -I -S {plain} verify", tmp_path)
    assert done.returncode == bundle.REFUSED
    assert not marker.exists()


# The loader of MAIN, without what runs the program: the classes alone.
LOADER = bundle.MAIN.split('\nif "BUNDLE" not in globals():')[0]
IMPORT_ALL = """\
import os, sys
path = sys.argv[1]
with open(path, "rb") as f:
    data = f.read()
exec(%r)
sys.meta_path.insert(0, VerifiedBundle(path, data))
os.remove(path)
planted = os.path.join(sys.argv[2], "tpuctl_agent")  # a folder of the package, on the path
os.makedirs(planted)
for name in ["__init__", *sys.argv[3:]]:
    with open(os.path.join(planted, name + ".py"), "w") as f:
        f.write("raise SystemExit('the planted ' + __name__ + ' ran')\\n")
sys.path.insert(0, sys.argv[2])
for name in sys.argv[3:]:
    module = __import__("tpuctl_agent." + name, fromlist=["_"])
    print(name, type(module.__spec__.loader).__name__, module.__spec__.origin)
"""


def test_every_module_comes_from_the_checked_bytes_in_memory(tmp_path: Path) -> None:
    """What a process imports after its start (the agent forks; a program imports its
    module by name) comes from the bytes the check read once: the file may be gone or
    changed, a folder of the package on the path, and no .pyc is read or written."""
    path = tmp_path / bundle.file_name()
    path.write_bytes(bundle.build())
    names = sorted(p.stem for p in AGENT_DIR.glob("*.py") if p.stem not in ("bundle", "__init__"))
    argv = [AGENT_PYTHON, "-I", "-S", "-c", IMPORT_ALL % LOADER, str(path), str(tmp_path)]
    done = subprocess.run([*argv, *names], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"{n} VerifiedBundle {path}/tpuctl_agent/{n}.py" for n in names
    ]
    assert not list(tmp_path.rglob("*.pyc"))


def test_the_install_replaces_whatever_is_there_and_is_atomic_and_checked(tmp_path: Path) -> None:
    data = bundle.build()
    installed = tmp_path / bundle.remote_path().removeprefix("~/")
    assert _sh(bundle.install_command(), tmp_path, data[:-100]).returncode != 0  # a cut upload
    assert not installed.parent.exists() or list(installed.parent.iterdir()) == []
    for _ in range(2):
        assert _sh(bundle.install_command(), tmp_path, data).returncode == 0
        assert [p.name for p in installed.parent.iterdir()] == [installed.name]
        assert installed.read_bytes() == data
    installed.write_bytes(data[:-1] + b"!")  # changed on the VM
    assert _sh(bundle.install_command(), tmp_path, data).returncode == 0
    assert installed.read_bytes() == data
    assert _sh(bundle.command("verify"), tmp_path).returncode == 0
