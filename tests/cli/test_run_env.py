"""`tpuctl run --requirements`: an environment resolved once, cached in the bucket, installed
on every worker from it; against a package index the test serves on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.env_index import Index, serving
from tests.cli.test_run import bucket_objects

SCRIPT = """\
import os, sys
import tinya
print("worker", os.environ["TPUCTL_WORKER_ID"], "value", tinya.value(), flush=True)
print("python", sys.executable, flush=True)
"""


@pytest.fixture
def index(tmp_path: Path) -> Iterator[Index]:
    with serving(tmp_path / "index") as served:
        served.add(
            "tinya", "1.0", "import tinyb\ndef value():\n    return tinyb.B * 2\n", ["tinyb>=1"]
        )
        served.add("tinyb", "1.0", "B = 21\n")
        yield served


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "job.py").write_text(SCRIPT)
    (root / "requirements.txt").write_text("tinya  # the one we need\n")
    return root


def run(cli, project: Path, index: Index, *flags: str):  # noqa: ANN001, ANN201
    return cli("run", str(project / "job.py"), "--env", f"PIP_INDEX_URL={index.url}", *flags)


def env_objects(emulator) -> dict[str, bytes]:  # noqa: ANN001
    return {k: v for k, v in bucket_objects(emulator).items() if k.startswith("tpuctl/envs/")}


def test_the_default_requirements_are_built_once_then_come_from_the_bucket(
    cli, emulator, project, index
) -> None:
    first = run(cli, project, index)
    assert first.code == 0, first.err
    assert "environment: the work dir's requirements.txt" in first.err
    assert "--no-requirements" in first.err
    assert "worker 0 value 42" in first.out
    assert "/.tpuctl/envs/" in first.out  # the script ran with the venv's python
    assert "built on 1 worker(s)" in first.err and "2 packages" in first.err
    asked = index.count()
    assert asked > 0
    objects = env_objects(emulator)
    (index_name,) = [k for k in objects if k.endswith("/index.json")]
    entry = json.loads(objects[index_name])
    assert sorted(entry["packages"]) == ["tinya==1.0", "tinyb==1.0"]
    assert not any(k.endswith("/lock.json") for k in objects)
    # a new node: the wheels come from the bucket, the index is never asked
    second = run(cli, project, index)
    assert second.code == 0, second.err
    assert "worker 0 value 42" in second.out
    assert "from the bucket on 1 worker(s)" in second.err
    assert index.count() == asked


def test_no_requirements_runs_with_the_system_python(cli, emulator, project, index) -> None:
    (project / "job.py").write_text("import sys\nprint('python', sys.executable)\n")
    r = run(cli, project, index, "--no-requirements")
    assert r.code == 0, r.err
    assert "/.tpuctl/envs/" not in r.out and "environment" not in r.err
    assert index.count() == 0


def test_a_reused_node_makes_a_new_venv_from_its_kept_wheels(cli, emulator, project, index):
    assert cli("create", "kept", "-a", "v3-8").code == 0
    try:
        first = run(cli, project, index, "--node", "kept")
        assert first.code == 0, first.err
        second = run(cli, project, index, "--node", "kept")
        assert second.code == 0, second.err
        said = "the wheels kept on this VM, checked, in a new venv: 2 packages"
        assert said in second.out and "0 B fetched" in second.out
        assert "reused on 1 worker(s); 0 B moved" in second.err
        assert "worker 0 value 42" in second.out
    finally:
        assert cli("delete", "kept", "--yes").code == 0


def test_the_venv_is_isolated_unless_asked(cli, emulator, project, index) -> None:
    (project / "job.py").write_text(
        "import sys, importlib.util\n"
        "print('click', importlib.util.find_spec('click') is not None)\n"
        "print(open(sys.prefix + '/pyvenv.cfg').read().replace(chr(10), ' '))\n"
    )
    alone = run(cli, project, index)
    assert alone.code == 0, alone.err
    assert "click False" in alone.out  # the image's packages are not in the venv
    assert "include-system-site-packages = false" in alone.out
    shared = run(cli, project, index, "--system-site-packages")
    assert shared.code == 0, shared.err
    assert "include-system-site-packages = true" in shared.out
    keys = {k.split("/")[2] for k in env_objects(emulator)}
    assert len(keys) == 2  # a key of its own


def test_index_credentials_reach_pip_but_never_the_bucket(cli, emulator, project, index):
    url = index.url.replace("http://", "http://me:hunter2@")
    r = cli("run", str(project / "job.py"), "--env", f"PIP_INDEX_URL={url}")
    assert r.code == 0, r.err
    assert "worker 0 value 42" in r.out
    assert "hunter2" not in r.err
    assert not any(b"hunter2" in v for v in bucket_objects(emulator).values())


def test_a_job_file_names_the_requirements(cli, emulator, project, index) -> None:
    (project / "requirements.txt").unlink()
    (project / "deps").mkdir()
    (project / "deps" / "pyproject.toml").write_text(
        '[project]\nname = "mine"\nversion = "0"\ndependencies = ["tinya>=1.0"]\n'
    )
    (project / "job.toml").write_text(
        'script = "job.py"\nrequirements = "deps/pyproject.toml"\n'
        f'[env]\nPIP_INDEX_URL = "{index.url}"\n'
    )
    r = cli("run", "-f", str(project / "job.toml"))
    assert r.code == 0, r.err
    assert "worker 0 value 42" in r.out and "built on 1 worker(s)" in r.err
    (entry,) = [json.loads(v) for k, v in env_objects(emulator).items() if k.endswith("index.json")]
    assert entry["requirements"] == ["tinya>=1.0"]
