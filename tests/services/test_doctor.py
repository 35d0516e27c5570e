"""tpuctl doctor's static checks: each broken fixture trips exactly the check it is
named after, and the real examples trip nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tpuctl.catalog import parse_accelerator
from tpuctl.services.doctor import NotPythonError, check

FIXTURES = Path(__file__).parent / "doctor_fixtures"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# fixtures that need another slice than a v3-8 to go wrong
ACCELERATOR = {"jax-distributed": "v4-32", "jax-device-count": "v4-8"}
CASES = sorted(p.stem if p.is_file() else p.name for p in FIXTURES.iterdir() if p.name[0] != "_")


def _script(name: str) -> tuple[Path, Path]:
    path = FIXTURES / name
    return (path / "train.py", path) if path.is_dir() else (path.with_suffix(".py"), FIXTURES)


@pytest.mark.parametrize("name", CASES)
def test_each_fixture_trips_exactly_its_check(name: str) -> None:
    script, root = _script(name)
    acc = parse_accelerator(ACCELERATOR.get(name, "v3-8"))
    findings = check(script, root, acc)
    assert {f.check for f in findings} == {name.removesuffix("-imported")}, findings
    assert all(f.line > 0 and f.fix and f.message for f in findings)


@pytest.mark.parametrize("acc", ["v2-8", "v3-8", "v4-8", "v4-32", "v5litepod-16", "v6e-8"])
@pytest.mark.parametrize("script", ["tf_keras_tpu.py", "jax_tpu.py", "train.py"])
def test_the_examples_are_clean(script: str, acc: str) -> None:
    findings = check(EXAMPLES / script, EXAMPLES, parse_accelerator(acc))
    assert [f for f in findings if f.severity != "hint"] == []


def test_the_done_when_check_is_an_error_at_the_model_line() -> None:
    (finding,) = check(FIXTURES / "tf-outside-scope.py", FIXTURES, parse_accelerator("v3-8"))
    assert (finding.file, finding.line, finding.severity) == ("tf-outside-scope.py", 10, "error")
    assert "strategy.scope()" in finding.fix


def test_a_module_of_the_work_dir_is_followed() -> None:
    script, root = _script("tf-outside-scope-imported")
    (finding,) = check(script, root, parse_accelerator("v3-8"))
    assert finding.file == "model_lib.py" and finding.line == 7


def test_per_core_batch_names_the_global_batch_it_implies() -> None:
    (finding,) = check(FIXTURES / "tf-batch-per-core.py", FIXTURES, parse_accelerator("v3-8"))
    assert "8 x 128 = 1024 on a v3-8" in finding.fix
    (finding,) = check(FIXTURES / "tf-batch-per-core.py", FIXTURES, parse_accelerator("v4-8"))
    assert "4 x 128 = 512 on a v4-8" in finding.fix


def test_a_model_built_in_a_function_called_in_the_scope_is_fine(tmp_path: Path) -> None:
    original = (FIXTURES / "tf-outside-scope.py").read_text()
    fixed = original.replace(
        "model = tf.keras.Sequential([tf.keras.layers.Dense(10)])\nwith strategy.scope():\n",
        "def build():\n    return tf.keras.Sequential([tf.keras.layers.Dense(10)])\n\n\n"
        "with strategy.scope():\n    model = build()\n",
    )
    assert fixed != original
    (tmp_path / "train.py").write_text(fixed)
    assert check(tmp_path / "train.py", tmp_path, parse_accelerator("v3-8")) == []


def test_jax_device_count_fits_a_host_with_eight_devices() -> None:
    assert check(FIXTURES / "jax-device-count.py", FIXTURES, parse_accelerator("v3-8")) == []


def test_a_script_without_a_framework_has_no_findings(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text("import os\nprint(open('/etc/hostname').read())\n")
    assert check(tmp_path / "job.py", tmp_path, None) == []


@pytest.mark.parametrize(
    ("name", "content", "says"),
    [
        ("broken.py", "def f(:\n", "broken.py:1: not Python"),
        ("run.sh", "#!/bin/sh\necho hi\n", "is not a Python script"),
        ("blob.py", b"\xff\xfe\x00", "not UTF-8"),
    ],
)
def test_a_script_that_is_not_python_is_refused(tmp_path: Path, name, content, says) -> None:  # noqa: ANN001
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(NotPythonError) as e:
        check(path, tmp_path, None)
    assert says in e.value.message
    assert e.value.exit_code == 2


def test_an_evaluate_method_of_the_programs_own_class_is_not_keras(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(
        "import tensorflow as tf\n\n\nclass Trainer:\n    def evaluate(self, data, steps):\n"
        "        return steps\n\n\n"
        "data = tf.data.Dataset.range(8).repeat()\nTrainer().evaluate(data, 100)\n"
    )
    assert check(tmp_path / "train.py", tmp_path, None) == []
