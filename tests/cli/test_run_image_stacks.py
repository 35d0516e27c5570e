"""`tpuctl stacks` of a job that runs in a container image: the image holds a Python (this
machine's, with its libraries and standard library) whose script loops in a function of
its own; the worker runs the container with the job's site, stacks and profile folders
and `--pid=host`, so tpuctl's sitecustomize registers the image's Python as a script's,
and `tpuctl stacks` shows where it waits."""

from __future__ import annotations

import json
import os
import tarfile
from typing import Any

import pytest

from tests.cli.test_run import wait_for
from tests.cli.test_run_image import IMAGE
from tests.emulator import registry_helpers as reg
from tests.emulator.ssh_helpers import mine

pytestmark = reg.CONFINED
PYTHON = "/usr/bin/python3.11"  # Debian's (/usr/bin/python3 -> python3.11)
STDLIB = "/usr/lib/python3.11"
LEFT_OUT = {"test", "site-packages", "dist-packages", "__pycache__"}
LOOP = """\
import os
import time


def waiting_in_the_image(n):
    time.sleep(0.5)


profile = os.environ["TPUCTL_PROFILE_DIR"]
print("path", os.environ["PYTHONPATH"], "profile", profile, os.path.isdir(profile), flush=True)
n = 0
while True:
    n += 1
    print("image loop", n, flush=True)
    waiting_in_the_image(n)
"""


def _add(tar: tarfile.TarFile, name: str, source: str, mode: int = 0o644) -> None:
    """`source`'s bytes (its links followed) as the regular file `name`."""
    info = tarfile.TarInfo(name)
    info.size, info.mode = os.path.getsize(source), mode
    with open(source, "rb") as f:
        tar.addfile(info, f)


@pytest.fixture(scope="session")
def python_layer(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """An uncompressed layer holding this machine's Python 3.11, the libraries `ldd`
    names for it and its standard library (no tests, no site packages), made once."""
    if not os.path.isfile(PYTHON) or not os.path.isdir(STDLIB):
        pytest.skip(f"needs {PYTHON} and {STDLIB}")
    path = tmp_path_factory.mktemp("python-image") / "layer.tar"
    with tarfile.open(path, "w") as tar:
        for name, source in reg.libraries(PYTHON).items():
            _add(tar, name, source, 0o755)
        for folder, subfolders, files in os.walk(STDLIB):
            subfolders[:] = sorted(d for d in subfolders if d not in LEFT_OUT)
            for file in sorted(files):
                source = os.path.join(folder, file)
                if os.path.exists(source):  # a link to /etc that is not here: left out
                    _add(tar, source.lstrip("/"), source)
        _add(tar, "usr/bin/python3", PYTHON, 0o755)
    return path.read_bytes()


@pytest.fixture
def python_image(emulator: Any, python_layer: bytes) -> str:
    """IMAGE:py, whose Cmd is the looping script, pushed (the repository made first)."""
    reg.make_repository(emulator.address)
    registry = str(emulator.status()["registry_endpoint"])
    site = "usr/lib/python3/dist-packages"  # a libtpu, as the doctor's check wants one
    script = reg.layer(
        {
            "app/loop.py": LOOP.encode(),
            f"{site}/libtpu/__init__.py": b"",
            f"{site}/libtpu-0.0.1.dist-info/METADATA": b"Name: libtpu\n",
        }
    )
    config = {"Cmd": ["python3", "/app/loop.py"], "Env": ["PYTHONPATH=/app/lib"]}
    reg.push_image(registry, "py", [python_layer, script], config)
    return f"{IMAGE}:py"


@pytest.mark.long
def test_stacks_shows_where_the_images_python_waits(
    cli, emulator, emulator_server, python_image
) -> None:
    r = cli("run", "--image", python_image, "-a", "v3-8", "--detach", "--json")
    assert r.code == 0, r.err
    job = json.loads(r.out)["job"]
    try:
        wait_for(lambda: "image loop 2\n" in cli("logs", job).out, timeout=120)
        taken = cli("stacks", job)
        assert taken.code == 0, taken.err
        assert "in waiting_in_the_image" in taken.out, taken.out
        assert '"/app/loop.py"' in taken.out
        assert "python3 /app/loop.py" in taken.out  # the process's command line
        # the container's environment: tpuctl's site first, then the image's PYTHONPATH;
        # the job's profile folder, mounted (a JAX or TensorFlow imported there listens)
        said = cli("logs", job).out
        folder = f"/.tpuctl/jobs/{job}"
        assert f"{folder}/site:/app/lib profile " in said, said
        assert f"{folder}/profile True\n" in said
    finally:
        assert cli("cancel", job).code == 0
        wait_for(lambda: emulator.nodes() == [], timeout=120)
    wait_for(lambda: json.loads(cli("jobs", job, "--json").out)["state"] == "CANCELLED")
    left = mine(emulator_server, holders=True)
    wait_for(lambda: not left(), timeout=30)
