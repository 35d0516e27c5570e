"""`tpuctl jobs JOB` and `jobs --json`: the job's environment as its workers' statuses
record it (key, how each worker got it, packages, bytes, ready time)."""

from __future__ import annotations

import json
import re

from tests.cli.conftest import one_line_error
from tests.cli.test_run_env import index, project, run

__all__ = ["index", "project"]  # the fixtures, shared


def test_jobs_job_shows_how_each_worker_got_the_environment(cli, emulator, project, index):
    r = run(cli, project, index, "-a", "v3-32", "--name", "envjob")
    assert r.code == 0, r.err
    shown = cli("jobs", "envjob")
    assert shown.code == 0, shown.err
    (line,) = [ln for ln in shown.out.splitlines() if ln.startswith("environment ")]
    assert re.fullmatch(
        r"environment [0-9a-f]{12}: 2 packages, built on 1 worker\(s\), from the bucket on "
        r"3 worker\(s\); [1-9]\d*(\.\d)? (B|KiB|MiB) moved; "
        r"ready in \d+\.\ds \(build: resolve .*\)",
        line,
    ), line
    assert line in r.err  # the line the end of `run` said
    assert "envjob" in shown.out and "SUCCEEDED" in shown.out

    one = json.loads(cli("jobs", "envjob", "--json").out)
    env = one["environment"]
    assert env["key"].startswith(line.split()[1].rstrip(":")) and len(env["key"]) == 64
    assert env["workers"] == {"built": 1, "cached": 3}
    assert env["packages"] == 2 and env["bytes"] > 0 and env["seconds"] > 0
    assert set(env["phases"]) >= {"resolve", "upload", "install"}


def test_every_row_of_jobs_json_has_its_environment(cli, emulator, project, index) -> None:
    assert run(cli, project, index, "--name", "with").code == 0
    (project / "plain.py").write_text("print('no imports')\n")
    assert cli("run", str(project / "plain.py"), "--name", "without", "--no-requirements").code == 0
    rows = {r["name"]: r for r in json.loads(cli("jobs", "--json").out)}
    assert rows["with"]["environment"]["workers"] == {"built": 1}
    assert rows["without"]["environment"] is None
    plain = cli("jobs", "without")
    assert plain.code == 0, plain.err
    assert "without" in plain.out and "environment" not in plain.out


def test_jobs_of_a_job_that_is_not_there_says_so(cli, emulator) -> None:
    r = cli("jobs", "20261129-153012-ab12cd")
    assert r.code != 0
    assert "no job 20261129-153012-ab12cd in gs://" in one_line_error(r)
