"""What `tpuctl run` stages of the work dir: never tpuctl's own files (its stdout and
stderr redirected there, the outputs brought home there), and every file as it was read."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import spawned
from tests.cli.test_run import _node_name, _running, bucket_names, bucket_objects, wait_for

SCRIPT = """\
import os
print("hello from the TPU")
open(os.path.join(os.environ["TPUCTL_OUTPUT_DIR"], "result.txt"), "w").write("done")
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "t.py").write_text(SCRIPT)
    return root


def manifests(emulator) -> dict[str, set[str]]:  # noqa: ANN001
    """job id -> the paths its request stages."""
    return {
        name.split("/")[2]: set(json.loads(data)["manifest"])
        for name, data in bucket_objects(emulator).items()
        if name.endswith("/request.json")
    }


def test_a_run_whose_output_goes_to_a_file_in_its_folder_succeeds(emulator, folder) -> None:
    """`tpuctl run t.py -a v3-8 > run.log 2>&1`, in the script's folder."""
    with open(folder / "run.log", "wb") as log:
        proc = subprocess.run(
            [sys.executable, "-m", "tpuctl", "run", "t.py", "-a", "v3-8"],
            cwd=folder,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=os.environ.copy(),
            timeout=180,
            check=False,
        )
    said = (folder / "run.log").read_text()
    assert proc.returncode == 0, said
    assert "hello from the TPU" in said
    assert (
        "left out of the job's code, as tpuctl's own: run.log (this run's stdout and stderr)"
        in said
    )
    assert list(manifests(emulator).values()) == [{"t.py"}]
    assert emulator.nodes() == []


def test_a_second_run_stages_no_earlier_outputs(cli, emulator, folder, monkeypatch) -> None:
    monkeypatch.chdir(folder)  # the default outputs folder, ./outputs, is in the work dir
    first = cli("run", "t.py", "--json")
    assert first.code == 0, first.err
    assert (folder / "outputs" / json.loads(first.out)["job"] / "result.txt").is_file()
    second = cli("run", "t.py", "--json")
    assert second.code == 0, second.err
    assert ": 1 file, 1 uploaded" in first.err
    assert ": 1 file, 0 uploaded" in second.err  # the same file count as the first
    assert (
        "left out of the job's code, as tpuctl's own: outputs/ (where job outputs come home)"
        in second.err
    )
    assert sorted(map(sorted, manifests(emulator).values())) == [["t.py"], ["t.py"]]


def test_outputs_asked_for_inside_the_work_dir_are_not_staged(cli, emulator, folder) -> None:
    (folder / "results" / "old").mkdir(parents=True)
    (folder / "results" / "old" / "model.ckpt").write_text("an earlier run's")
    r = cli("run", str(folder / "t.py"), "--outputs", str(folder / "results"))
    assert r.code == 0, r.err
    assert "outputs/" not in r.err
    assert "as tpuctl's own: results/ (where job outputs come home)" in r.err
    assert list(manifests(emulator).values()) == [{"t.py"}]
    assert (folder / "results" / "result.txt").read_text() == "done"


WAITS = """\
import os, time
open(os.path.join(os.environ["TPUCTL_OUTPUT_DIR"], "result.txt"), "w").write("so far")
time.sleep(120)
"""


def _wait_outputs_synced(emulator) -> str:  # noqa: ANN001
    """Until the job's result.txt is in the bucket; the job's id."""
    wait_for(lambda: any(k.endswith("/outputs/result.txt") for k in bucket_names(emulator)))
    (name,) = [k for k in bucket_names(emulator) if k.endswith("/outputs/result.txt")]
    return name.split("/")[2]


def test_outputs_synced_before_a_ctrl_c_come_home(emulator, folder) -> None:
    (folder / "t.py").write_text(WAITS)
    with _running(folder / "t.py", "--sync-every", "1") as proc:
        job = _wait_outputs_synced(emulator)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=90)
    assert proc.returncode == 130, err
    home = Path("outputs") / job
    assert (home / "result.txt").read_text() == "so far"
    assert err.strip().splitlines()[-1] == (
        f"error: interrupted: stopped job {job} and deleted its node; "
        f"downloaded 1 output file(s) to {home}"
    )
    assert emulator.nodes() == []


def test_a_ctrl_c_before_any_output_says_so_and_jobs_shows_the_runs_exit(
    cli, emulator, folder
) -> None:
    (folder / "t.py").write_text("import time\nprint('nap begins', flush=True)\ntime.sleep(120)\n")
    # With --json the job's log comes on stderr: its line means the client watches the job
    # (the agent's status says the script runs before the client's start call returns; a
    # Ctrl-C between the two is the start guard's, as test_run.py's Ctrl-C test says)
    with spawned("run", str(folder / "t.py"), "--sync-every", "1", "--json", timeout=90) as p:
        p.wait_for("nap begins", timeout=60)
        p.proc.send_signal(signal.SIGINT)
    proc, err = p.proc, p.err
    assert proc.returncode == 130, err
    (row,) = json.loads(cli("jobs", "--json").out)
    assert err.strip().splitlines()[-1] == (
        f"error: interrupted: stopped job {row['id']} and deleted its node; "
        "no outputs: the job had synced none"
    )
    # the script was stopped with SIGTERM (143 in its status); the job's run said 130
    assert row["state"] == "CANCELLED" and row["exitStatus"] == 130, row
    assert emulator.nodes() == []


def test_a_ctrl_c_with_no_outputs_names_the_command_that_fetches_them(emulator, folder) -> None:
    (folder / "t.py").write_text(WAITS)
    with _running(folder / "t.py", "--sync-every", "1", "--no-outputs") as proc:
        job = _wait_outputs_synced(emulator)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=90)
    assert proc.returncode == 130, err
    assert not Path("outputs").exists()
    assert err.strip().splitlines()[-1] == f"hint: `tpuctl outputs {job}` fetches its outputs"
    assert emulator.nodes() == []


def test_outputs_synced_before_a_preemption_without_restarts_come_home(emulator, folder):
    (folder / "t.py").write_text(WAITS)
    with _running(folder / "t.py", "--spot", "--restarts", "0", "--sync-every", "1") as proc:
        job = _wait_outputs_synced(emulator)
        emulator.preempt(_node_name(emulator))
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert "was PREEMPTED during attempt 1 and the job has used its 0 restart(s)" in err
    home = Path("outputs") / job
    assert (home / "result.txt").read_text() == "so far"
    assert f"downloaded 1 output file(s) to {home}" in err
    assert emulator.nodes() == []
