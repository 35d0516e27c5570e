"""`tpuctl run -f job.toml` and `--print-spec`: the file's options, flags that win, paths
from the file's folder, errors with file, line and key, and a spec that runs the same job."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import one_line_error
from tests.cli.test_run import bucket_objects
from tpuctl.services.run import jobfile

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SCRIPT = """\
import json, os, sys
print("worker", os.environ["TPUCTL_WORKER_ID"], "of", os.environ["TPUCTL_NUM_WORKERS"])
print("args", json.dumps(sys.argv[1:]))
print("env", os.environ.get("A"), os.environ.get("B"), os.environ.get("C"))
open(os.path.join(os.environ["TPUCTL_OUTPUT_DIR"], "out.txt"), "w").write("made")
"""


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project with its job file in a folder of its own; the test runs from elsewhere."""
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "src" / "train.py").write_text(SCRIPT)
    (root / "src" / "big.ckpt").write_bytes(b"x" * 10)
    (root / "vars.env").write_text("B=from-env-file\nC=from-env-file\n")
    (root / "job.toml").write_text(
        "# our training job\n"
        'script = "src/train.py"\n'
        'args = ["--steps", "5"]\n'
        'accelerator = "v3-32"\n'
        'workdir = "src"\n'
        'exclude = ["*.ckpt"]\n'
        'env_file = "vars.env"\n'
        'outputs = "out"\n'
        'name = "nightly"\n'
        "\n"
        "[env]\n"
        'A = "from-file"\n'
        'C = "from-file"\n'
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    return root


def test_a_job_file_runs_with_paths_from_its_folder_and_flags_win(cli, emulator, repo) -> None:
    r = cli("run", "-f", str(repo / "job.toml"), "-a", "v3-8", "--env", "C=from-flag")
    assert r.code == 0, r.err
    assert "worker 0 of 1" in r.out  # --accelerator v3-8 won over the file's v3-32
    assert 'args ["--steps", "5"]' in r.out
    # [env] over the env file, --env over both, name by name
    assert "env from-file from-env-file from-flag" in r.out
    assert (repo / "out" / "out.txt").read_text() == "made"  # outputs: from the file's folder
    (record,) = [
        json.loads(v) for k, v in bucket_objects(emulator).items() if k.endswith("job.json")
    ]
    assert record["name"] == "nightly"
    assert record["workdir"] == str(repo / "src")
    (request,) = [
        json.loads(v) for k, v in bucket_objects(emulator).items() if k.endswith("request.json")
    ]
    assert sorted(request["manifest"]) == ["train.py"]  # exclude = ["*.ckpt"]
    assert emulator.nodes() == []


def test_print_spec_round_trip_runs_the_same_job(cli, emulator, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("train.py").write_text(SCRIPT)
    r = cli("run", "train.py", "-a", "v3-8", "--spot", "--print-spec", "--", "--lr", "0.1 x")
    assert r.code == 0, r.err
    assert r.err == ""
    assert emulator.nodes() == [] and emulator.requests().get("POST create") is None
    spec = tomllib.loads(r.out)
    assert spec == {
        "script": "train.py",
        "args": ["--lr", "0.1 x"],
        "accelerator": "v3-8",
        "spot": True,
        "restarts": 3,  # the default that --spot brings, pinned
    }
    Path("job.toml").write_text(r.out)
    again = cli("run", "-f", "job.toml", "--print-spec")
    assert again.code == 0 and again.out == r.out  # the file says all the flags said
    run = cli("run", "-f", "job.toml")
    assert run.code == 0, run.err
    assert "v3-8 spot in us-central1: about" in run.err
    assert 'args ["--lr", "0.1 x"]' in run.out
    assert emulator.nodes() == []


SA = "trainer@my-project.iam.gserviceaccount.com"


def test_print_spec_names_every_option_given(cli, emulator, repo) -> None:
    (repo / "reqs.txt").write_text("numpy\n")
    r = cli(
        "run", "-f", str(repo / "job.toml"), "--zone", "us-central1-a,us-central1-b",
        "--queued", "--valid-until", "2h", "--ttl", "1d", "--restarts", "1", "--sync-every", "5",
        "--slices", "2", "--repairs", "2",
        "--setup", "pip install -r requirements.txt", "--keep", "--detach", "--no-check",
        "--heartbeat-deadline", "90s", "--start-deadline", "15m", "--retry-on-failure",
        "--max-cost", "25", "--start-lease", "30s", "--api", "compute",
        "--flex-start", "--max-run-duration", "4h", "--hang-after", "5m",
        "--bucket", "gs://mine", "--project", "my-project", "--version", "tpu-vm-base",
        "--force", "--env", 'Q=say "hi"', "--service-account", SA, "--scopes", "cloud-platform",
        "--requirements", str(repo / "reqs.txt"), "--rebuild-env", "--system-site-packages",
        "--preemptible", "--reserved", "--reservation", "r1", "--labels", "team=ml",
        "--network", "net", "--subnetwork", "sub", "--tags", "ssh,web", "--internal-ip-only",
        "--print-spec",
    )  # fmt: skip
    assert r.code == 0, r.err
    spec = tomllib.loads(r.out)
    assert spec["zones"] == ["us-central1-a", "us-central1-b"]
    assert spec["script"] == "../repo/src/train.py" or spec["script"] == str(
        repo / "src" / "train.py"
    )
    assert spec["workdir"] == str(repo / "src")  # outside the current folder: absolute
    assert spec["env_file"] == str(repo / "vars.env")
    assert spec["env"] == {"A": "from-file", "C": "from-file", "Q": 'say "hi"'}
    for key, value in {
        "queued": True, "valid_until": "2h", "ttl": "1d", "restarts": 1, "sync_every": 5.0,
        "setup": "pip install -r requirements.txt", "teardown": False, "detach": True,
        "no_check": True, "heartbeat_deadline": "90s", "start_deadline": "15m",
        "retry_on_failure": True, "bucket": "gs://mine", "project": "my-project",
        "version": "tpu-vm-base", "force": True, "name": "nightly", "accelerator": "v3-32",
        "exclude": ["*.ckpt"], "slices": 2, "max_cost": "25", "start_lease": "30s",
        "api": "compute", "flex_start": True, "max_run_duration": "4h", "preemptible": True,
        "reserved": True, "reservation": "r1", "labels": ["team=ml"], "network": "net",
        "subnetwork": "sub", "tags": ["ssh,web"], "internal_ip_only": True, "hang_after": 300.0,
        "repairs": 2,
    }.items():  # fmt: skip
        assert spec[key] == value, key
    # all but what was not given (the job file gives outputs, so not --no-outputs; an
    # --image goes with none of --setup, --requirements: test_run_image.py)
    expected = {"node", "zone", "no_outputs", "no_requirements", "image"}
    assert set(jobfile.KEYS) - set(spec) == expected


def test_every_option_of_run_has_a_key() -> None:
    import inspect

    from tpuctl.cli.run import run

    params = set(inspect.signature(run).parameters) - {"ctx"}
    keys = {jobfile.PARAM_OF.get(k, k) for k in jobfile.KEYS}
    # --json is how this call prints, -f and --print-spec are about the file itself
    assert params - keys == {"json_out", "file", "print_spec"}
    assert keys <= params


def test_errors_name_the_file_line_and_key(cli, emulator, repo) -> None:
    job = repo / "job.toml"
    text = job.read_text()
    job.write_text(text.replace('accelerator = "v3-32"', 'accelerator = "v9-8"'))
    r = cli("run", "-f", str(job))
    assert r.code == 2, r.err
    line = one_line_error(r)
    assert line == (
        f"error: {job}:4: accelerator: accelerator type 'v9-8' is not offered in zone us-central1-a"
    )
    # a flag that replaces the bad value: the file's value is not used, so not checked
    assert cli("run", "-f", str(job), "-a", "v3-8", "--print-spec").code == 0
    job.write_text(text.replace('name = "nightly"\n', 'name = "nightly"\nrestarts = "three"\n'))
    r = cli("run", "-f", str(job))
    assert r.code == 2
    assert one_line_error(r) == (
        f"error: {job}:10: restarts: expected a whole number, 0 or more, not 'three'"
    )
    job.write_text(text.replace("src/train.py", "src/missing.py"))
    r = cli("run", "-f", str(job))
    assert r.code == 2
    assert f"error: {job}:2: script: script {repo / 'src' / 'missing.py'} is not a file" in r.err
    job.write_text(text + "[env]\n")
    r = cli("run", "-f", str(job))
    assert r.code == 2
    assert one_line_error(r) == (
        f"error: {job}:14: not valid TOML: Cannot declare ('env',) twice (column 5)"
    )
    r = cli("run")
    assert r.code == 2
    assert "no script: give one (tpuctl run SCRIPT) or a job file" in one_line_error(r)
    assert emulator.nodes() == [] and emulator.requests().get("POST create") is None
