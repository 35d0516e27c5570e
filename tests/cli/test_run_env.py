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
