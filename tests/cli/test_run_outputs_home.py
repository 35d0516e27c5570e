"""Where `tpuctl run` brings a job's outputs home: a folder it cannot write is refused
before anything is made; every folder it brought outputs to stays out of later jobs'
code; outputs synced before a failure (a node not made again after a preemption, a
folder gone bad by the end) come home or the way to fetch them is named."""

from __future__ import annotations

import signal
from pathlib import Path

from tests.cli import test_run_staging
from tests.cli.conftest import one_line_error
from tests.cli.test_run import _node_name, _running, bucket_names, wait_for
from tests.cli.test_run_staging import _wait_outputs_synced, manifests

folder = test_run_staging.folder  # the script's folder, as that module makes it


def test_outputs_that_cannot_be_made_are_refused_before_anything_is(cli, emulator, folder):
    r = cli("run", str(folder / "t.py"), "--outputs", "/proc/tpuctl-outputs")
    assert r.code == 2, r.err
    assert one_line_error(r) == (
        "error: invalid --outputs /proc/tpuctl-outputs: cannot create /proc/tpuctl-outputs: "
        "No such file or directory"
    )
    assert bucket_names(emulator) == []  # nothing staged
    assert not Path("/proc/tpuctl-outputs").exists()


def test_a_missing_outputs_folder_is_tried_and_not_left_behind(cli, emulator, folder) -> None:
    (folder / "t.py").write_text("import sys\nsys.exit(3)\n")
    r = cli("run", str(folder / "t.py"), "--outputs", str(folder / "new" / "out"))
    assert r.code == 3, r.err
    assert not (folder / "new").exists()  # made for the check only; the job made none


def test_earlier_outputs_stay_out_of_the_code_wherever_this_run_sends_its_own(
    cli, emulator, folder, tmp_path, monkeypatch
) -> None:
    monkeypatch.chdir(folder)
    earlier = folder / "outputs" / "20260101-000000-aaaaaa"
    earlier.mkdir(parents=True)
    for i in range(17):
        (earlier / f"step-{i}.txt").write_text("an earlier run's")
    first = cli("run", "t.py", "--outputs", "results")
    assert first.code == 0, first.err
    assert "as tpuctl's own: outputs/ (where job outputs come home)" in first.err
    assert (folder / "results" / "result.txt").read_text() == "done"
    assert (folder / "results" / ".tpuctl-outputs").is_file()
    second = cli("run", "t.py", "--outputs", str(tmp_path / "elsewhere"))
    assert second.code == 0, second.err
    assert (
        "left out of the job's code, as tpuctl's own: outputs/ (where job outputs come home), "
        "results/ (holds tpuctl's outputs: .tpuctl-outputs)"
    ) in second.err
    assert list(manifests(emulator).values()) == [{"t.py"}, {"t.py"}]


def test_outputs_that_cannot_be_written_at_the_end_name_the_way_to_fetch_them(
    cli, emulator, folder, tmp_path
) -> None:
    dest = tmp_path / "out"
    (folder / "t.py").write_text(WAITS)
    with _running(folder / "t.py", "--outputs", str(dest), "--sync-every", "1") as proc:
        job = _wait_outputs_synced(emulator)
        dest.write_text("a file where the folder was to be")  # after the check at the start
        assert cli("cancel", job).code == 0
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert "unexpected" not in err
    assert f"its outputs could not be written to {dest} ({dest}: " in err
    assert f"`tpuctl outputs {job} DEST` fetches them into a folder DEST" in err
    assert emulator.nodes() == []


WAITS = """\
import os, time
open(os.path.join(os.environ["TPUCTL_OUTPUT_DIR"], "result.txt"), "w").write("so far")
time.sleep(120)
"""


def _preempted(emulator, folder: Path, *extra: str, stop: bool = False) -> tuple[int, str, str]:  # noqa: ANN001 - the emulator's control
    """A spot run preempted once, its node refused when made again (quota), or with
    `stop`, interrupted while it is made again: (exit status, stderr, job id)."""
    (folder / "t.py").write_text(WAITS)
    with _running(folder / "t.py", "--spot", "--restarts", "1", "--sync-every", "1", *extra) as p:
        job = _wait_outputs_synced(emulator)
        name = _node_name(emulator)
        if stop:
            emulator.durations(create=None)  # the recreated node stays CREATING
        else:
            emulator.faults(rate=1.0, codes=[429], quota=True, paths="nodes\\?nodeId=")
        emulator.preempt(name)
        if stop:
            wait_for(lambda: [n["state"] for n in emulator.nodes()] == ["CREATING"])
            p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=120)
    emulator.faults()
    return p.returncode, err, job


def test_a_failed_recreate_brings_the_outputs_of_attempt_1_home(emulator, folder) -> None:
    code, err, job = _preempted(emulator, folder)
    assert code == 5, err
    assert "recreating it (restart 1 of 1)" in err
    home = Path("outputs") / job
    assert (home / "result.txt").read_text() == "so far"
    assert f"downloaded 1 output file(s) to {home}" in err
    wait_for(lambda: emulator.nodes() == [])


def test_a_failed_recreate_with_no_outputs_names_the_command_that_fetches_them(
    emulator, folder
) -> None:
    code, err, job = _preempted(emulator, folder, "--no-outputs")
    assert code == 5, err
    assert not Path("outputs").exists()
    assert f"`tpuctl outputs {job}` fetches its outputs" in err.strip().splitlines()[-1]
    wait_for(lambda: emulator.nodes() == [])


def test_a_ctrl_c_while_the_node_is_made_again_names_the_command_that_fetches_them(
    emulator, folder
) -> None:
    code, err, job = _preempted(emulator, folder, stop=True)
    assert code == 130, err
    assert f"error: interrupted before job {job} restarted; " in err
    assert f"`tpuctl outputs {job}` fetches its outputs" in err.strip().splitlines()[-1]
    assert emulator.nodes() == []
