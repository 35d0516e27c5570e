"""The default bucket's name is predictable: one taken by another project is never used
unless the user names it, and then it is said whose it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import one_line_error

DEFAULT = "tpuctl-demo-tpuctl"  # the default bucket of the emulator's project


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "job" / "hello.py"
    path.parent.mkdir()
    path.write_text("print('hello from the job')\n")
    return path


def _squat(emulator) -> None:  # noqa: ANN001
    """Another project creates the victim's default bucket first (names are global)."""
    emulator.storage_client(project="squatter-project").create_bucket(DEFAULT)


def _objects(emulator) -> list[str]:  # noqa: ANN001
    return [b.name for b in emulator.storage_client().list_blobs(DEFAULT)]


def test_the_bucket_reports_the_project_that_made_it(emulator) -> None:
    _squat(emulator)
    mine = emulator.storage_client().create_bucket("tpuctl-demo-own")
    theirs = emulator.storage_client().get_bucket(DEFAULT)
    assert theirs.project_number and mine.project_number
    assert theirs.project_number != mine.project_number


def test_run_refuses_a_default_bucket_another_project_owns(cli, emulator, script) -> None:
    _squat(emulator)
    r = cli("run", str(script))
    assert r.code == 3, r.err
    line = one_line_error(r)
    assert f"the bucket gs://{DEFAULT} belongs to another project (number " in line
    assert "not to tpuctl-demo" in line
    assert "--bucket gs://NAME" in r.err  # the way out
    assert emulator.nodes() == [] and _objects(emulator) == []  # nothing made, nothing sent


@pytest.mark.parametrize(
    "command", [("jobs",), ("logs", "nightly"), ("outputs", "nightly"), ("cancel", "nightly")]
)
def test_job_commands_refuse_a_default_bucket_another_project_owns(
    cli, emulator, command: tuple[str, ...]
) -> None:
    _squat(emulator)
    r = cli(*command)
    assert r.code == 3, r.err
    assert f"the bucket gs://{DEFAULT} belongs to another project (number " in one_line_error(r)


def test_a_bucket_named_by_the_user_is_trusted_and_said_so(cli, emulator, script) -> None:
    _squat(emulator)
    r = cli("run", str(script), "--bucket", f"gs://{DEFAULT}")
    assert r.code == 0, r.err
    assert f"using gs://{DEFAULT} as given (--bucket): it belongs to project number" in r.err
    assert "hello from the job" in r.out
    assert emulator.nodes() == []


def test_init_fails_its_bucket_step_on_a_squatted_default(cli, emulator) -> None:
    _squat(emulator)
    r = cli("init", "--yes")
    assert f"gs://{DEFAULT} belongs to another project" in r.err + r.out
    assert r.code != 0


def _plant_job(emulator) -> str:  # noqa: ANN001
    """A job record in the squatted bucket: what a command would read from it."""
    job = "20261129-153012-ab12cd"
    blob = emulator.storage_client().bucket(DEFAULT).blob(f"tpuctl/jobs/{job}/job.json")
    blob.upload_from_string('{"node": "busy"}')
    return job


def test_top_refuses_a_default_bucket_another_project_owns(cli, emulator) -> None:
    _squat(emulator)
    job = _plant_job(emulator)
    assert cli("create", "busy", "-a", "v3-8", "--labels", f"tpuctl-job={job}").code == 0
    try:
        r = cli("top", "--json")  # a node has a job: its state would come from the bucket
        assert r.code == 3, r.err
        assert f"the bucket gs://{DEFAULT} belongs to another project (number " in (
            one_line_error(r)
        )
        assert r.out == ""
    finally:
        assert cli("delete", "busy", "--yes").code == 0


def test_gc_envs_unused_refuses_a_default_bucket_another_project_owns(cli, emulator) -> None:
    _squat(emulator)
    env = emulator.storage_client().bucket(DEFAULT).blob("tpuctl/envs/" + "a" * 64 + "/index")
    env.upload_from_string("{}")
    r = cli("gc", "--envs-unused", "1d", "--yes")
    assert r.code == 3, r.err
    assert f"the bucket gs://{DEFAULT} belongs to another project (number " in one_line_error(r)
    assert "tpuctl/envs/" + "a" * 64 + "/index" in _objects(emulator)  # nothing deleted


def test_doctor_refuses_a_default_bucket_another_project_owns(cli, emulator) -> None:
    _squat(emulator)
    job = _plant_job(emulator)
    assert cli("create", "busy", "-a", "v3-8", "--labels", f"tpuctl-job={job}").code == 0
    try:
        r = cli("doctor", "busy")
        assert r.code == 3, r.err
        assert f"the bucket gs://{DEFAULT} belongs to another project (number " in r.err
    finally:
        assert cli("delete", "busy", "--yes").code == 0


def test_completion_offers_no_job_of_a_default_bucket_another_project_owns(cli, emulator) -> None:
    from tests.cli.test_output import _complete

    _squat(emulator)
    job = _plant_job(emulator)
    assert _complete("tpuctl logs 2") == []
    # named, the same bucket is trusted as given: its jobs are offered
    assert _complete(f"tpuctl logs --bucket gs://{DEFAULT} 2") == [job]
