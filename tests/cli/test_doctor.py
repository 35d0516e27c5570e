"""tpuctl doctor on the command line, and the same check as the gate of `tpuctl run`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.cli.conftest import one_line_error

TF_IMAGE, TF_POD = "tpu-vm-tf-2.16.0-pjrt", "tpu-vm-tf-2.16.0-pod-pjrt"
FIXTURES = Path(__file__).resolve().parents[1] / "services" / "doctor_fixtures"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_an_error_exits_1_with_file_line_and_fix(cli) -> None:
    r = cli("doctor", str(FIXTURES / "tf-outside-scope.py"), "--version", TF_IMAGE)
    assert r.code == 1
    lines = r.out.splitlines()
    # the file as typed: here an absolute path
    head = f"{FIXTURES / 'tf-outside-scope.py'}:10: error: a Keras model is created outside"
    assert lines[0].startswith(head)
    assert lines[0].endswith("[tf-outside-scope]")
    assert lines[1] == (
        "    fix: create the model, optimizer and metrics inside `with strategy.scope():`"
    )
    assert "1 error, 0 warnings, 0 hints" in r.err


def test_warnings_alone_exit_0(cli) -> None:
    r = cli("doctor", str(FIXTURES / "tf-drop-remainder.py"))
    assert r.code == 0, r.err
    assert ": warning: " in r.out and "[tf-drop-remainder]" in r.out


def test_a_clean_example_says_so(cli) -> None:
    r = cli("doctor", str(EXAMPLES / "tf_keras_tpu.py"), "-a", "v4-32", "--version", TF_POD)
    assert (r.code, r.out) == (0, "")
    assert "tf_keras_tpu.py on a v4-32: 0 errors, 0 warnings, 0 hints" in r.err


def test_the_accelerator_changes_the_verdict(cli) -> None:
    script = str(FIXTURES / "jax-device-count.py")
    assert cli("doctor", script, "-a", "v3-8").code == 0
    r = cli("doctor", script, "-a", "v4-8")
    assert r.code == 1 and "each host of a v4-8 has 4" in r.out


def test_json_is_a_list_on_stdout(cli) -> None:
    r = cli("doctor", str(FIXTURES / "tf-batch-per-core.py"), "--json", "--version", TF_IMAGE)
    assert r.code == 0
    (finding,) = json.loads(r.out)
    assert finding["check"] == "tf-batch-per-core"
    assert set(finding) == {"file", "line", "severity", "check", "message", "fix"}
    r = cli("doctor", str(EXAMPLES / "jax_tpu.py"), "--json", "--setup", 'pip install "jax[tpu]"')
    assert (r.code, json.loads(r.out)) == (0, [])


def test_workdir_follows_the_imports_inside_it(cli) -> None:
    root = FIXTURES / "tf-outside-scope-imported"
    r = cli("doctor", "train.py", "--workdir", str(root))
    assert r.code == 1
    assert r.out.startswith(f"{root / 'model_lib.py'}:7: error:")  # as --workdir was typed
    assert r.err.startswith(f"{root / 'train.py'} on a v3-8: 1 error")


def test_files_are_named_as_typed_from_where_the_user_is(cli, tmp_path, monkeypatch) -> None:  # noqa: ANN001
    sub = tmp_path / "proj" / "sub"
    sub.mkdir(parents=True)
    shutil.copy(FIXTURES / "tf-outside-scope.py", sub / "train.py")
    monkeypatch.chdir(tmp_path)
    r = cli("doctor", "proj/sub/train.py", "--version", TF_IMAGE)
    assert r.code == 1 and r.out.startswith("proj/sub/train.py:10: error:"), r.out
    assert r.err.startswith("proj/sub/train.py on a v3-8: 1 error"), r.err
    found = json.loads(cli("doctor", "proj/sub/train.py", "--version", TF_IMAGE, "--json").out)
    assert [f["file"] for f in found] == ["train.py"]  # --json: relative to the work folder


@pytest.mark.parametrize(
    ("name", "content", "says"),
    [
        (None, "", "error: script {path} not found"),
        ("broken.py", "def f(:\n", "error: {path}:1: not Python: "),
        ("run.sh", "#!/bin/sh\necho hi\n", "error: {path} is not a Python script"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(cli, tmp_path, name, content, says) -> None:  # noqa: ANN001
    path = tmp_path / (name or "missing.py")
    if name:
        path.write_text(content)
    r = cli("doctor", str(path))
    assert r.code == 2
    assert one_line_error(r).startswith(says.format(path=path))
    assert r.out == ""


def test_an_unknown_accelerator_is_a_usage_error(cli) -> None:
    r = cli("doctor", str(EXAMPLES / "train.py"), "-a", "v9-8")
    assert r.code == 2
    assert one_line_error(r) == "error: unknown accelerator 'v9-8'"


# -- the gate inside tpuctl run ------------------------------------------------------


@pytest.fixture
def outside_scope(tmp_path: Path) -> Path:
    shutil.copy(FIXTURES / "tf-outside-scope.py", tmp_path / "train.py")
    return tmp_path / "train.py"


def test_run_stops_before_creating_anything(cli, emulator, outside_scope) -> None:
    r = cli("run", str(outside_scope), "-a", "v3-8")
    assert r.code == 1
    assert "train.py:10: error: a Keras model is created outside strategy.scope()" in r.err
    assert "fix: create the model, optimizer and metrics inside" in r.err
    assert "nothing was created (first: train.py:10: tf-outside-scope)" in r.err
    assert "--force" in r.err
    assert emulator.nodes() == []
    assert not [k for k in emulator.requests() if "create" in k]


def test_run_with_force_goes_ahead(cli, emulator, outside_scope) -> None:
    # TensorFlow is not on the emulated workers: the job fails, but only after the node
    # was created, the code staged and the script started.
    r = cli("run", str(outside_scope), "-a", "v3-8", "--force")
    assert "train.py:10: error:" in r.err
    assert "--force: running despite 1 error(s)" in r.err
    assert emulator.requests().get("POST create", 0) == 1
    assert "ModuleNotFoundError" in r.out + r.err
    assert emulator.nodes() == []  # torn down as usual


def test_run_with_no_check_skips_it(cli, emulator, outside_scope) -> None:
    r = cli("run", str(outside_scope), "-a", "v3-8", "--no-check")
    assert "tf-outside-scope" not in r.err
    assert emulator.requests().get("POST create", 0) == 1
    assert emulator.nodes() == []


def test_run_prints_warnings_and_goes_on(cli, emulator, tmp_path) -> None:
    script = tmp_path / "job.py"
    script.write_text('import os\nos.environ["CUDA_VISIBLE_DEVICES"] = "0"\nprint("ran")\n')
    r = cli("run", str(script), "-a", "v3-8")
    assert r.code == 0, r.err
    assert "job.py:2: warning: CUDA_VISIBLE_DEVICES selects GPUs" in r.err
    assert "ran" in r.out
    assert emulator.nodes() == []


def test_run_warns_of_a_framework_the_image_lacks_and_goes_on(cli, emulator, tmp_path) -> None:
    script = tmp_path / "job.py"
    script.write_text("try:\n    import jax\nexcept ImportError:\n    jax = None\nprint('ran')\n")
    r = cli("run", str(script), "-a", "v3-8")
    assert r.code == 0, r.err
    assert "job.py:2: warning: the script imports jax, but the runtime version" in r.err
    assert "[runtime-no-framework]" in r.err and 'pip install -U "jax[tpu]"' in r.err
    assert "ran" in r.out
    assert emulator.nodes() == []


# -- what the job's environment installs ------------------------------------------------


def test_the_work_dirs_requirements_install_the_framework(cli, tmp_path) -> None:
    """`run` builds the job's environment from the work dir's requirements.txt (or
    --requirements): what it lists is installed, no --setup needed."""
    (tmp_path / "train.py").write_text("import jax\nprint(jax.devices())\n")
    warned = "the script imports jax, but the runtime version"
    r = cli("doctor", str(tmp_path / "train.py"), "-a", "v5litepod-8")
    assert (r.code, warned in r.out) == (0, True)  # nothing installs it
    (tmp_path / "requirements.txt").write_text("jax[tpu]==0.4.30\n")
    r = cli("doctor", str(tmp_path / "train.py"), "-a", "v5litepod-8")
    assert (r.code, r.out) == (0, ""), r.out
    r = cli("doctor", str(tmp_path / "train.py"), "-a", "v5litepod-8", "--no-requirements")
    assert warned in r.out and "no --setup installs it" in r.out
    (tmp_path / "requirements.txt").write_text("numpy\n")  # listed, but not jax
    r = cli("doctor", str(tmp_path / "train.py"), "-a", "v5litepod-8")
    assert "nor does the job's environment (requirements.txt)" in r.out
    assert "fix: list it in requirements.txt, or install it first: --setup" in r.out
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "t"\ndependencies = ["jax[tpu]"]\n')
    r = cli("doctor", str(tmp_path / "train.py"), "-a", "v5litepod-8", "--requirements",
            str(tmp_path / "pyproject.toml"))  # fmt: skip
    assert (r.code, r.out) == (0, ""), r.out


def test_run_counts_its_environment_before_warning(cli, emulator, outside_scope) -> None:
    root = outside_scope.parent
    outside_scope.write_text("import jax\n" + outside_scope.read_text())  # and an error
    (root / "requirements.txt").write_text("jax[tpu]\n")
    r = cli("run", str(outside_scope), "-a", "v5litepod-8")
    assert r.code == 1  # the gate's error: nothing created, nothing built
    assert "environment: the work dir's requirements.txt" in r.err
    assert "[tf-outside-scope]" in r.err
    assert "imports jax" not in r.err  # requirements.txt installs it
    assert emulator.nodes() == []


# -- the batch of a GPU script ----------------------------------------------------------

KERAS_NO_STRATEGY = """import tensorflow as tf

BATCH_SIZE = 64
ds = tf.data.Dataset.range(1000).batch(BATCH_SIZE, drop_remainder=True)
model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
model.fit(ds)
"""


def test_a_gpu_scripts_small_batch_is_said_with_the_missing_strategy(cli, tmp_path) -> None:
    """docs/doctor.md's case: a GPU script's 64 on a v3-8, no strategy yet. Both findings
    in one run; a tf.data pipeline with no Keras nor strategy (JAX's input) has no global
    batch to judge."""
    script = tmp_path / "train.py"
    script.write_text(KERAS_NO_STRATEGY)
    r = cli("doctor", str(script), "-a", "v3-8", "--json")
    checks = {f["check"]: f for f in json.loads(r.out)}
    assert {"tf-no-strategy", "tf-batch-small"} <= set(checks), r.out
    assert "gives each of the 8 cores of a v3-8 8 examples" in checks["tf-batch-small"]["message"]
    script.write_text(KERAS_NO_STRATEGY.split("model =")[0])  # tf.data alone
    r = cli("doctor", str(script), "-a", "v3-8", "--json")
    assert not [f for f in json.loads(r.out) if f["check"].startswith("tf-batch")], r.out
