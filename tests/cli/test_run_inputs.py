"""`tpuctl run`'s inputs refused before anything is made: one line naming the input and
what is allowed, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import one_line_error


@pytest.fixture
def script(tmp_path: Path) -> Path:
    (tmp_path / "adir").mkdir()
    (tmp_path / "t.py").write_text("print('hi')\n")
    return tmp_path / "t.py"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["{dir}"], "script {dir} is a folder: give the file to run in it (a .py file or an "
         "executable), e.g. tpuctl run {dir}/train.py"),
        (["{script}", "--teardown", "--keep"], "--teardown and --keep are exclusive: choose one"),
        (["{script}", "--keep", "--teardown"], "--teardown and --keep are exclusive: choose one"),
        (["{script}", "--spot", "--reserved"], "--spot and --reserved are exclusive: choose one"),
        (["{script}", "--api", "compute", "--preemptible", "--reserved"],
         "--preemptible and --reserved are exclusive: choose one"),
        (["{script}", "--scopes", ""], "invalid --scopes '': give one or more scopes, e.g. "
         "cloud-platform (leave --scopes out for the default)"),
        (["{script}", "--restarts", "three"],
         "invalid --restarts 'three': a whole number 0 to 100"),
        (["{script}", "--restarts", "101"], "invalid --restarts '101': a whole number 0 to 100"),
        (["{script}", "--start-lease", "2h"],
         "invalid --start-lease 2h: at most 1h (a node outlives its gone client by that long)"),
        (["{script}", "--setup", "x" * (8 << 20)],
         "--setup is 8,388,608 bytes: at most 64 KiB (one shell command)"),
        (["{script}", "-a", "tpu-v4-8"],  # in us-central1-a, which has v3-8 but no v4
         "unknown accelerator type 'tpu-v4-8': did you mean v4-8?"),
    ],
)  # fmt: skip
def test_bad_input_is_refused_before_any_node(cli, emulator, script, args, says) -> None:
    names = {"dir": str(script.parent / "adir"), "script": str(script)}
    r = cli("run", *(a.format(**names) if a.startswith("{") else a for a in args), "--no-check")
    assert r.code == 2, r.err
    assert one_line_error(r) == "error: " + says.format(**names)
    assert emulator.requests().get("POST create", 0) == 0 and emulator.nodes() == []


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("restarts = 1000000000000000000",
         "job.toml:2: restarts: invalid --restarts 1000000000000000000: a whole number 0 to 100"),
        ('[env]\n"A=B" = "c"', "'A=B' is not a variable name"),
        (f'setup = "{"x" * 70000}"', "--setup is 70,000 bytes: at most 64 KiB"),
    ],
)  # fmt: skip
def test_a_job_files_values_are_held_to_the_flags_rules(cli, emulator, script, line, says):
    job = script.parent / "job.toml"
    job.write_text(f'script = "t.py"\n{line}\n')
    r = cli("run", "-f", str(job), "--no-check")
    assert r.code == 2, r.err
    assert says in one_line_error(r)
    assert emulator.requests().get("POST create", 0) == 0 and emulator.nodes() == []
