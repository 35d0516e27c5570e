"""Hints and refusals that say what is true: no empty zone list, no "if it still exists"
for a create refused before any call, a device is not "not found", our words for a
number option, a job file's bad `[env]` entry at its own line, the URL pip could not
fetch named instead of the index."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.cli.conftest import one_line_error
from tpuctl.agent.envbuild import resolution_error
from tpuctl.emulator.core.ports import free_port


def test_a_near_type_offered_in_no_known_zone_gets_no_empty_zone_list(cli, emulator) -> None:
    r = cli("create", "x", "-a", "tpu7x-7")
    assert r.code == 2, r.err
    assert one_line_error(r) == "error: unknown accelerator type 'tpu7x-7': did you mean tpu7x-8?"
    assert "offered in" not in r.err
    assert emulator.nodes() == []


@pytest.mark.parametrize(
    ("labels", "says"),
    [
        ("ÄÖ=1", "error: invalid label key 'ÄÖ' (in ÄÖ=1): a lowercase letter a-z, then"),
        ("team=Ops", "error: invalid label value 'Ops' (in team=Ops): empty, or lowercase"),
        ("k" * 64 + "=1", "error: invalid label key 'kkk"),
    ],
)
def test_a_refused_label_is_one_line_before_any_call(cli, emulator, tmp_path, labels, says) -> None:
    script = tmp_path / "train.py"
    script.write_text("print(1)\n")
    for args in (["create", "lbl", "-a", "v3-8"], ["run", str(script), "-a", "v3-8"]):
        r = cli(*args, "--labels", labels)
        assert r.code == 2, r.err
        assert one_line_error(r).startswith(says)
        assert "still exists" not in r.err and "hint:" not in r.err
    assert emulator.requests() == {}  # nothing asked of the cloud


def test_a_device_given_as_a_script_is_not_said_to_be_missing(cli) -> None:
    r = cli("doctor", "/dev/null")
    assert r.code == 2, r.err
    assert one_line_error(r) == (
        "error: script /dev/null is not a regular file: give a Python script or an "
        "executable (a .py file, or a file with #!), or the folder of code with --workdir"
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["list", "--limit", "abc"], "error: invalid --limit 'abc': a whole number 1 to"),
        (["list", "--limit", "0"], "error: invalid --limit '0': a whole number 1 to"),
        (["jobs", "--limit", "-1"], "error: invalid --limit '-1': a whole number 1 to"),
        (["quota", "request", "Q", "--value", "-5"],
         "error: invalid --value '-5': a whole number 1 to"),
        (["quota", "request", "Q", "--value", "x"], "error: invalid --value 'x': a whole number"),
    ],
)  # fmt: skip
def test_a_bad_count_is_refused_in_our_words(cli, emulator, args, says) -> None:
    r = cli(*args)
    assert r.code == 2, r.err
    assert one_line_error(r).startswith(says)
    assert "Input should" not in r.err
    assert emulator.requests() == {}


def test_a_bad_env_entry_of_a_job_file_is_named_at_its_own_line(cli, emulator, tmp_path) -> None:
    (tmp_path / "train.py").write_text("print(1)\n")
    job = tmp_path / "job.toml"
    job.write_text('script = "train.py"\n\n[env]\nSTEPS = "100"\n"2BAD" = "x"\nOK = "1"\n')
    r = cli("run", "-f", str(job))
    assert r.code == 2, r.err
    assert one_line_error(r) == (
        f"error: {job}:5: env: '2BAD' is not a variable name (letters, digits and _, not "
        "first a digit)"
    )
    job.write_text('script = "train.py"\n[env]\nA = "1"\nLIST = [1]\n')
    r = cli("run", "-f", str(job))
    assert one_line_error(r) == f"error: {job}:4: env: LIST: expected a string, not [1]"
    assert emulator.nodes() == []


def test_a_requirement_url_that_does_not_answer_is_named_not_the_index(tmp_path) -> None:
    url = f"http://127.0.0.1:{free_port()}/files/tinya-1.0-py3-none-any.whl"  # nothing there
    (tmp_path / "req.txt").write_text(f"tinya @ {url}\n")
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--retries", "0", "--no-index", "--no-cache-dir",
         "--target", str(tmp_path / "t"), "-r", str(tmp_path / "req.txt")],
        capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert pip.returncode != 0
    said = resolution_error(pip.stdout + pip.stderr, {})
    port = url.split(":")[2].split("/")[0]
    assert said.startswith(
        f"environment: pip could not fetch http://127.0.0.1:{port}/…/tinya-1.0-py3-none-any.whl:"
    ), said
    assert "Connection refused" in said and "pypi.org" not in said
