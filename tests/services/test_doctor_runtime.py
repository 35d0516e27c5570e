"""Section 2 of tpuctl doctor: the frameworks a script imports against the runtime
version and --setup, from the catalogue's pairs (tpuctl/frameworks.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tpuctl import frameworks
from tpuctl.catalog import parse_accelerator
from tpuctl.services.doctor import check


def _findings(tmp_path: Path, source: str, version: str, setup: str | None = None,
              acc: str = "v3-8") -> list:  # type: ignore[type-arg]  # fmt: skip
    script = tmp_path / "train.py"
    script.write_text(source)
    found = check(script, tmp_path, parse_accelerator(acc), version, setup)
    return [f for f in found if f.check.startswith("runtime-")]


@pytest.mark.parametrize(
    ("version", "carried"),
    [
        ("tpu-vm-tf-2.16.0-pjrt", {"tensorflow": "2.16.0"}),
        ("tpu-vm-tf-2.15.0-pod-se", {"tensorflow": "2.15.0"}),
        ("tpu-vm-tf-2.10.0-pod-v4", {"tensorflow": "2.10.0"}),
        ("tpu-vm-pt-2.0", {"torch": "2.0", "torch_xla": "2.0"}),
        ("tpu-ubuntu2204-base", {}),
        ("v2-alpha-tpuv5-lite", {}),
    ],
)
def test_what_each_image_carries(version: str, carried: dict[str, str]) -> None:
    assert frameworks.carried(version) == carried


def test_the_tensorflow_image_suggested_fits_the_slice_and_the_pin() -> None:
    one_host, pod = parse_accelerator("v3-8"), parse_accelerator("v4-32")
    assert frameworks.tf_runtime(one_host) == "tpu-vm-tf-2.18.0-pjrt"
    assert frameworks.tf_runtime(pod) == "tpu-vm-tf-2.18.0-pod-pjrt"
    assert frameworks.tf_runtime(one_host, "2.15") == "tpu-vm-tf-2.15.0-pjrt"
    assert frameworks.tf_runtime(parse_accelerator("v4-8"), "2.10.0") == "tpu-vm-tf-2.10.0-v4"


def test_tensorflow_on_the_base_image_without_setup(tmp_path: Path) -> None:
    (f,) = _findings(tmp_path, "import tensorflow as tf\n", "tpu-ubuntu2204-base", acc="v4-32")
    assert (f.check, f.severity, f.line) == ("runtime-no-framework", "warning", 1)
    assert "has no tensorflow and no --setup installs it" in f.message
    assert "--version tpu-vm-tf-2.18.0-pod-pjrt" in f.fix
    assert _findings(tmp_path, "import tensorflow as tf\n", "tpu-vm-tf-2.16.0-pjrt") == []


def test_a_pinned_tensorflow_that_does_not_fit_the_runtime(tmp_path: Path) -> None:
    src = "import tensorflow as tf\n"
    (f,) = _findings(tmp_path, src, "tpu-ubuntu2204-base", "pip install tensorflow==2.15")
    assert f.check == "runtime-tf-version" and "from pip on tpu-ubuntu2204-base" in f.message
    assert "--version tpu-vm-tf-2.15.0-pjrt" in f.fix
    (tmp_path / "requirements.txt").write_text("numpy\ntensorflow==2.15.0\n")
    setup = "pip install -r requirements.txt"
    (f,) = _findings(tmp_path, src, "tpu-vm-tf-2.16.0-pjrt", setup)
    assert "requirements.txt:2 installs tensorflow 2.15.0 over the TensorFlow 2.16.0" in f.message
    assert "--version tpu-vm-tf-2.15.0-pjrt" in f.fix
    assert _findings(tmp_path, src, "tpu-vm-tf-2.15.0-pjrt", setup) == []


@pytest.mark.parametrize(
    ("source", "setup_line"),
    [("import jax\n", 'pip install -U "jax[tpu]"'), ("import torch_xla\n", "torch_xla[tpu]")],
)
def test_jax_and_torch_xla_need_a_setup_on_the_base_images(
    tmp_path: Path, source: str, setup_line: str
) -> None:
    (f,) = _findings(tmp_path, source, "v2-alpha-tpuv5-lite", acc="v5litepod-8")
    assert f.check == "runtime-no-framework" and setup_line in f.fix
    setup = frameworks.SETUP["jax" if "jax" in source else "torch_xla"]
    assert _findings(tmp_path, source, "v2-alpha-tpuv5-lite", setup, "v5litepod-8") == []
    (f,) = _findings(tmp_path, source, "tpu-ubuntu2204-base", "bash setup.sh")
    assert "the --setup given does not visibly install it" in f.message


def test_an_image_the_catalogue_does_not_know_is_not_judged(tmp_path: Path) -> None:
    assert _findings(tmp_path, "import tensorflow\n", "my-custom-image") == []
