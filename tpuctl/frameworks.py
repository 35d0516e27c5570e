"""The catalogue's framework half: which ML framework each TPU runtime version (the VM
image) carries, and the runtime version or `--setup` line that fits a framework.

Pure data and small functions, no heavy imports (`tpuctl doctor` and `tpuctl run`'s
check read it; the emulator reads it to fill an emulated image's site-packages).

Sources, the "TPU software versions" page, https://cloud.google.com/tpu/docs/runtimes
(older revisions at https://cloud.google.com/tpu/docs/supported-tpu-versions):
- PyTorch and JAX: use the common images `v2-alpha-tpuv6e` (v6e), `v2-alpha-tpuv5`
  (v5p), `v2-alpha-tpuv5-lite` (v5e), `tpu-ubuntu2204-base` (v4 and older), "then
  install the framework you want": those images carry no framework.
- TensorFlow: images are named `tpu-vm-tf-x.y.z[-pod][-{device_api}]`, x.y.z being the
  TensorFlow they carry; `-pod` for a multi-host slice; from 2.15.0 on a device API is
  required, `-pjrt` or `-se` (stream executor, the only one before 2.15.0). v5e, v5p and
  v6e take TensorFlow 2.15.0 or later, with `-pjrt`. v4 with TensorFlow 2.10.0 or older
  uses the `-v4` images (`tpu-vm-tf-2.10.0-v4`, `tpu-vm-tf-2.10.0-pod-v4`).
- `tpu-vm-pt-X.Y` images (older) carry PyTorch and PyTorch/XLA X.Y.
The install lines: JAX's installation guide (https://docs.jax.dev/en/latest/installation.html,
`pip install -U "jax[tpu]"`) and PyTorch/XLA's README (https://github.com/pytorch/xla,
`pip install torch torch_xla[tpu] -f https://storage.googleapis.com/libtpu-releases/index.html`).
"""

from __future__ import annotations

import re

from tpuctl.catalog import RUNTIME_GENERATIONS, SliceShape, default_runtime

# The frameworks tpuctl knows, by the import name a script uses -> the pip distribution.
FRAMEWORKS: dict[str, str] = {"tensorflow": "tensorflow", "jax": "jax", "torch_xla": "torch-xla"}
_TF_IMAGE = re.compile(r"^tpu-vm-tf-(\d+\.\d+\.\d+)(-pod)?(-pjrt|-se|-v4)?$")
_PT_IMAGE = re.compile(r"^tpu-vm-pt-(\d+\.\d+(?:\.\d+)?)(-pod)?$")
# The --setup line that installs a framework on an image without it (no TensorFlow:
# Google's documented way to TensorFlow on a TPU VM is a tpu-vm-tf-* image).
SETUP: dict[str, str] = {
    "jax": 'pip install -U "jax[tpu]"',
    "torch_xla": "pip install torch torch_xla[tpu] "
    "-f https://storage.googleapis.com/libtpu-releases/index.html",
}


def carried(runtime_version: str) -> dict[str, str]:
    """The frameworks an image carries, by import name -> version (`tpu-vm-tf-2.16.0-pjrt`
    -> {"tensorflow": "2.16.0"}; the base images -> {})."""
    tf = _TF_IMAGE.match(runtime_version)
    if tf:
        return {"tensorflow": tf.group(1)}
    pt = _PT_IMAGE.match(runtime_version)
    if pt:
        return {"torch": pt.group(1), "torch_xla": pt.group(1)}
    return {}


def distributions(runtime_version: str) -> dict[str, str]:
    """What the image has installed, by pip distribution name -> version (the emulator
    fills an emulated worker's site-packages with these)."""
    names = {"torch": "torch", **FRAMEWORKS}
    return {names[k]: v for k, v in carried(runtime_version).items()}


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version)[:3])


def matches(pinned: str, version: str) -> bool:
    """Does `version` (2.16.0) fit a pin (`2.16`, `2.16.0`, `2.16.*`)?"""
    want = _key(pinned)
    return bool(want) and _key(version)[: len(want)] == want


def tf_runtimes(acc: SliceShape | None) -> list[tuple[str, str]]:
    """(runtime version, TensorFlow version) of every TensorFlow image the catalogue
    offers for the accelerator (pod images for multi-host slices), newest first, PJRT
    before SE."""
    found = []
    for name, gens in RUNTIME_GENERATIONS.items():
        m = _TF_IMAGE.match(name)
        if not m or (acc is not None and acc.generation not in gens):
            continue
        if acc is not None and bool(m.group(2)) != acc.multi_host:
            continue
        found.append((name, m.group(1), m.group(3) == "-pjrt"))
    found.sort(key=lambda t: (_key(t[1]), t[2]), reverse=True)
    return [(name, version) for name, version, _ in found]


def tf_runtime(acc: SliceShape | None, pinned: str | None = None) -> str | None:
    """The TensorFlow runtime version to suggest: the newest that fits the accelerator
    (and the pin, when one is given and an image carries it)."""
    options = tf_runtimes(acc)
    if pinned:
        fitting = [name for name, version in options if matches(pinned, version)]
        if fitting:
            return fitting[0]
    return options[0][0] if options else None


def runtime_of(version: str | None, acc: SliceShape | None) -> str:
    """The runtime version a node gets: the one asked for, else the generation's base."""
    return version or default_runtime(acc.generation if acc else "v4")
