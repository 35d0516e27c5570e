"""The agent's wheel installer (tpuctl/agent/wheels.py) puts a wheel where pip puts it:
the same files, the same scripts, metadata that importlib and pip read; and it refuses a
wheel that would write outside the venv."""

from __future__ import annotations

import ensurepip
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.env_index import pack
from tpuctl.agent import wheels

ENTRY_POINTS = "[console_scripts]\ndemo = demo:main\ndemo-sub = demo.tool:Tool.run [extra]\n"


def write_wheel(folder: Path, extra: dict[str, bytes] | None = None, pure: bool = True) -> Path:
    dist = "demo-1.0"
    files = {
        "demo/__init__.py": b"def main():\n    print('demo main')\n    return 0\n",
        "demo/tool.py": b"class Tool:\n    @staticmethod\n    def run():\n"
        b"        print('tool run')\n",
        "demo/run.sh": b"#!/bin/sh\necho run\n",
        f"{dist}.data/scripts/demo-script": b"#!python\nimport demo\ndemo.main()\n",
        f"{dist}.data/scripts/plain.sh": b"#!/bin/sh\necho plain\n",
        f"{dist}.data/scripts/demo-w": b"#!pythonw -u\nprint('w')\n",
        f"{dist}.data/data/share/demo/readme.txt": b"hello\n",
        f"{dist}.data/headers/demo.h": b"int demo(void);\n",
        f"{dist}.dist-info/METADATA": b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n",
        f"{dist}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: "
        + (b"true" if pure else b"false")
        + b"\nTag: py3-none-any\n",
        f"{dist}.dist-info/entry_points.txt": ENTRY_POINTS.encode(),
        **(extra or {}),
    }
    path = folder / f"{dist}-py3-none-any.whl"
    return pack(path, dist, files, executable=("demo/run.sh", f"{dist}.data/scripts/demo-script"))


def tree(root: Path) -> dict[str, int]:
    """Every file under `root` but bytecode and what pip alone writes (the request's
    record: REQUESTED, direct_url.json), with its mode's execute bits."""
    found = {}
    for path in root.rglob("*"):
        rel = path.relative_to(root).as_posix()
        if path.is_dir() or "__pycache__" in rel or rel.endswith(("/REQUESTED", "direct_url.json")):
            continue
        found[rel] = path.stat().st_mode & 0o111
    return found


def run(*command: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in command], capture_output=True, text=True, check=False)


def test_a_wheel_lands_where_pip_puts_it_and_its_scripts_run(tmp_path: Path) -> None:
    wheel = write_wheel(tmp_path)
    ours, pips = tmp_path / "ours", tmp_path / "pips"
    wheels.create(ours, sys.executable, system_site_packages=False)
    wheels.install(ours, [wheel])
    wheels.create(pips, sys.executable, system_site_packages=False)
    pip = run(sys.executable, "-m", "pip", "--python", pips / "bin" / "python", "install",
              "--no-index", "--no-deps", "--no-compile", "--disable-pip-version-check",
              wheel)  # fmt: skip
    assert pip.returncode == 0, pip.stderr

    mine, theirs = tree(ours), tree(pips)
    assert mine == theirs  # same files, same execute bits
    for name in ("demo", "demo-sub", "demo-script", "demo-w", "plain.sh"):  # same scripts
        text = (ours / "bin" / name).read_text().replace(str(ours), "VENV")
        assert text == (pips / "bin" / name).read_text().replace(str(pips), "VENV"), name
    assert mine["bin/demo"] and mine["bin/demo-script"] and not mine["bin/plain.sh"]
    info = Path(wheels.scheme(ours)["purelib"]) / "demo-1.0.dist-info"
    assert (info / "INSTALLER").read_text() == "tpuctl\n"
    for name in ("demo", "demo-sub", "demo-script"):  # the shebang is the venv's python
        first = (ours / "bin" / name).read_text().splitlines()[0]
        assert first == f"#!{ours / 'bin' / 'python'}", (name, first)
    assert run(ours / "bin" / "demo").stdout == "demo main\n"
    assert run(ours / "bin" / "demo-sub").stdout == "tool run\n"
    assert run(ours / "bin" / "demo-script").stdout == "demo main\n"
    assert run("sh", ours / "bin" / "plain.sh").stdout == "plain\n"

    # importlib.metadata and pip read the install: every file RECORD names exists
    listed = run(ours / "bin" / "python", "-c",
                 "import importlib.metadata as m; d = m.distribution('demo');"
                 "print(d.version); [print(f.locate()) for f in d.files]")  # fmt: skip
    lines = listed.stdout.splitlines()
    assert lines[0] == "1.0"
    located = {Path(os.path.normpath(p)) for p in lines[1:]}
    assert all(p.exists() for p in located)
    assert (ours / "bin" / "demo") in located and (info / "RECORD") in located
    assert (ours / "share" / "demo" / "readme.txt") in located
    shown = run(sys.executable, "-m", "pip", "--python", ours / "bin" / "python", "show", "-f",
                "demo")  # fmt: skip
    assert shown.returncode == 0 and "Version: 1.0" in shown.stdout, shown.stderr

    # and uninstalls cleanly with pip: nothing of it is left
    gone = run(sys.executable, "-m", "pip", "--python", ours / "bin" / "python", "uninstall",
               "-y", "demo")  # fmt: skip
    assert gone.returncode == 0, gone.stderr
    assert not [p for p in tree(ours) if "demo" in p]


def test_a_wheel_not_pure_python_goes_to_platlib(tmp_path: Path) -> None:
    wheel = write_wheel(tmp_path, pure=False)
    venv = tmp_path / "venv"
    wheels.create(venv, sys.executable, system_site_packages=False)
    wheels.install(venv, [wheel])
    assert (Path(wheels.scheme(venv)["platlib"]) / "demo" / "__init__.py").is_file()
    assert run(venv / "bin" / "demo").stdout == "demo main\n"


@pytest.mark.parametrize(
    "member",
    [
        "../../evil.py",
        "/tmp/evil.py",
        "demo-1.0.data/../../evil.py",
        "demo-1.0.data/elsewhere/evil.py",
    ],  # fmt: skip
)
def test_a_wheel_that_writes_outside_the_venv_is_refused(tmp_path: Path, member: str) -> None:
    wheel = write_wheel(tmp_path, {member: b"print('evil')\n"})
    venv = tmp_path / "sub" / "venv"
    wheels.create(venv, sys.executable, system_site_packages=False)
    with pytest.raises(wheels.BadWheel, match="demo-1.0-py3-none-any.whl"):
        wheels.install(venv, [wheel])
    assert not list(tmp_path.rglob("evil.py"))
    assert not Path("/tmp/evil.py").exists()


def test_the_system_site_packages_are_seen_only_when_asked(tmp_path: Path) -> None:
    # pytest is in this interpreter's site-packages: the stand-in for an image's framework
    seen = {}
    for system in (False, True):
        venv = tmp_path / f"venv-{system}"
        wheels.create(venv, sys.executable, system_site_packages=system)
        probe = run(venv / "bin" / "python", "-c", "import pytest")
        seen[system] = probe.returncode == 0
    assert seen == {False: False, True: True}


def test_real_wheels_install_as_pip_installs_them(tmp_path: Path) -> None:
    # the wheels CPython ships for ensurepip: pip (console scripts) and setuptools (a .pth,
    # thousands of files), as a package index serves them
    bundled = sorted((Path(ensurepip.__file__).parent / "_bundled").glob("*.whl"))
    assert {w.name.split("-")[0] for w in bundled} >= {"pip"}, bundled
    ours, pips = tmp_path / "ours", tmp_path / "pips"
    wheels.create(ours, sys.executable, system_site_packages=False)
    wheels.install(ours, bundled)
    wheels.create(pips, sys.executable, system_site_packages=False)
    pip = run(sys.executable, "-m", "pip", "--python", pips / "bin" / "python", "install",
              "--no-index", "--no-deps", "--no-compile", "--disable-pip-version-check",
              *bundled)  # fmt: skip
    assert pip.returncode == 0, pip.stderr
    assert tree(ours) == tree(pips)
    version = bundled[0].name.split("-")[1] if bundled[0].name.startswith("pip-") else None
    shown = run(ours / "bin" / "pip", "--version")
    assert shown.returncode == 0 and str(ours) in shown.stdout, shown.stderr
    assert version is None or shown.stdout.startswith(f"pip {version} ")
    checked = run(ours / "bin" / "pip", "check", "--disable-pip-version-check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
