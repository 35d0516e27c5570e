"""How an environment's requirement set is read and keyed (docs/environments.md)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tpuctl.agent import envkeys
from tpuctl.agent.envbuild import (
    EnvFailed,
    Wanted,
    index_named,
    package_of,
    resolution_error,
    scrub,
)
from tpuctl.agent.envs import Environments
from tpuctl.services.run.environment import lines_of

FACTS = envkeys.vm_facts("tpu-ubuntu2204-base", False)


def test_lines_are_normalized_so_cosmetic_edits_keep_the_key() -> None:
    a = envkeys.requirement_lines("jax[tpu]==0.4.30\n# a comment\n\nnumpy  >=1.26  # why\n")
    b = envkeys.requirement_lines("numpy >=1.26\njax[tpu]==0.4.30\njax[tpu]==0.4.30\n")
    assert a == b == ["jax[tpu]==0.4.30", "numpy >=1.26"]
    assert envkeys.env_key(a, FACTS) == envkeys.env_key(b, FACTS)


def test_a_pip_compiled_lock_file_keeps_its_hashes() -> None:
    text = "tinya==1.0 \\\n    --hash=sha256:aa\\\n    --hash=sha256:bb\n"
    assert envkeys.requirement_lines(text) == ["tinya==1.0 --hash=sha256:aa --hash=sha256:bb"]
    assert envkeys.pinned(envkeys.requirement_lines(text))
    assert not envkeys.pinned(["numpy>=1"])


@pytest.mark.parametrize(
    "change",
    [{"python": "3.11.9"}, {"platform": "linux-aarch64"}, {"runtime": "v2-alpha-tpuv5"},
     {"abi": "cpython-312-x86_64-linux-gnu"}, {"system_site_packages": True}],
)  # fmt: skip
def test_the_key_changes_with_python_platform_runtime_and_isolation(change) -> None:  # noqa: ANN001
    lines = ["tinya==1.0"]
    assert envkeys.env_key(lines, dict(FACTS, **change)) != envkeys.env_key(lines, FACTS)
    assert envkeys.env_key(["tinya==1.1"], FACTS) != envkeys.env_key(lines, FACTS)


@pytest.mark.parametrize(
    "line", ["-r base.txt", "--requirement=base.txt", "-c pins.txt", "-e .", "--editable ./x"]
)
def test_lines_that_read_other_files_are_refused(line: str) -> None:
    with pytest.raises(envkeys.BadRequirements, match="not supported"):
        envkeys.requirement_lines(f"numpy\n{line}\n")


def test_pyproject_and_uv_lock_give_their_dependencies() -> None:
    pyproject = '[project]\nname = "me"\ndependencies = ["b>=2", "a==1"]\n'
    assert lines_of("pyproject.toml", pyproject) == ["a==1", "b>=2"]
    lock = (
        'version = 1\n[[package]]\nname = "me"\nversion = "0.1"\nsource = { editable = "." }\n'
        '[[package]]\nname = "numpy"\nversion = "2.0.1"\n'
        'source = { registry = "https://pypi.org/simple" }\n'
    )
    assert lines_of("uv.lock", lock) == ["numpy==2.0.1"]
    with pytest.raises(ValueError, match="not valid TOML"):
        lines_of("pyproject.toml", "[project")


def test_pip_failures_become_one_line_naming_package_and_index() -> None:
    out = (
        "ERROR: Could not find a version that satisfies the requirement nosuch==1 "
        "(from versions: none)\n"
        "ERROR: No matching distribution found for nosuch==1\n"
    )
    env = {"PIP_INDEX_URL": "https://me:secret@pkgs.example.com/T0KEN-in-path/simple"}
    said = resolution_error(out, env)
    assert said == "environment: no version of nosuch==1 found on https://pkgs.example.com/…"
    assert package_of("jax-0.4.30-py3-none-any.whl") == "jax==0.4.30"


def test_pips_output_reaches_the_log_without_index_urls_or_env_values() -> None:
    hidden = ["https://me:pa55word@pkgs.example.com/T0KEN-in-path/simple", "sk-0123456789"]
    out = (
        "Looking in indexes: https://me:****@pkgs.example.com/T0KEN-in-path/simple\n"
        "Collecting tinya\n"
        "  Downloading https://pkgs.example.com/T0KEN-in-path/files/tinya-1.0.whl (1 kB)\n"
        "WARNING: 401 from https://me:****@pkgs.example.com/T0KEN-in-path/simple/tinya/\n"
        "the key sk-0123456789 and its token T0KEN-in-path, said by a build backend\n"
    )
    said = scrub(out, hidden)
    assert said == (
        "Collecting tinya\n"
        "  Downloading https://pkgs.example.com/… (1 kB)\n"
        "WARNING: 401 from https://pkgs.example.com/…\n"
        "the key [redacted] and its token [redacted], said by a build backend\n"
    )
    assert index_named({"PIP_EXTRA_INDEX_URL": hidden[0]}) == (
        "https://pypi.org/… + https://pkgs.example.com/…"
    )


def test_an_index_is_valid_only_with_a_sha256_per_wheel() -> None:
    good = {
        "version": envkeys.INDEX_VERSION,
        "key": "k",
        "wheels": [{"file": "a-1-py3-none-any.whl", "sha256": "0" * 64}],
    }
    assert envkeys.valid_index(good, "k")
    assert not envkeys.valid_index(good, "other")
    assert not envkeys.valid_index(dict(good, wheels=[{"file": "a.whl", "sha256": "x"}]), "k")
    assert not envkeys.valid_index(
        dict(good, wheels=[{"file": "../a.whl", "sha256": "0" * 64}]), "k"
    )


def test_a_builder_whose_python_has_no_pip_says_what_to_install(tmp_path: Path) -> None:
    # a venv made without pip stands for an image whose python3 has no python3-pip
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    python = str(bare / "bin" / "python")
    made = Environments(None, tmp_path, "job", 1, 0, "rt", lambda _: None,  # type: ignore[arg-type]
                        tmp_path / "log", python=python)  # fmt: skip
    want = Wanted("k" * 64, ["tinya==1.0"], {}, tmp_path / "wheels", dict(os.environ))
    with pytest.raises(EnvFailed) as failed:
        made._build(want)
    assert str(failed.value) == (
        f"environment: {python} has no pip to build the wheels with: install python3-pip in "
        "the image, or run with --no-requirements"
    )


def test_venvs_of_the_vm_unused_for_two_weeks_are_removed_by_the_next_job(tmp_path: Path):
    envs, said = tmp_path / "envs", []
    for name in ("mine", "recent", "old", "halfmade"):
        (envs / name / "venv").mkdir(parents=True)
        if name != "halfmade":
            (envs / name / "ready.json").write_text("{}")
    weeks_ago = time.time() - 15 * 86400
    for path in (envs / "old" / "ready.json", envs / "mine" / "ready.json", envs / "halfmade"):
        os.utime(path, (weeks_ago, weeks_ago))
    made = Environments(None, tmp_path, "job", 1, 0, "rt", said.append,  # type: ignore[arg-type]
                        tmp_path / "log")  # fmt: skip
    made.prune("mine")
    assert sorted(p.name for p in envs.iterdir()) == ["mine", "recent"]
    assert said == [
        f"environment {name}: removed its venv from this VM (no job used it for 14 days)"
        for name in ("halfmade", "old")
    ]


def test_every_env_value_and_index_url_piece_of_three_characters_leaves_the_log() -> None:
    hidden = ["http://127.0.0.1:8080/tk12345/simple", "ab", "100"]
    out = "GET /tk12345/simple/x from 127.0.0.1: 100 ab\n"
    # the host stays (it is said anyway); `ab` is too short to take out without the rest
    assert scrub(out, hidden) == "GET /[redacted]/[redacted]/x from 127.0.0.1: [redacted] ab\n"
