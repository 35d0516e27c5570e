"""The TPU runtime versions (VM images) the emulated TPU API offers, the generations each
boots on, and the frameworks each image carries.

From Google's "TPU software versions" page (https://cloud.google.com/tpu/docs/runtimes):
`tpu-ubuntu2204-base` for v4 and older, `v2-alpha-tpuv5-lite` (v5e), `v2-alpha-tpuv5`
(v5p), `v2-alpha-tpuv6e` (v6e), which carry no framework; TensorFlow images
`tpu-vm-tf-X.Y.Z[-pod][-pjrt|-se|-v4]` carry TensorFlow X.Y.Z, and "TPU v6e, v5e, and
v5p support TensorFlow 2.15.0 and newer" with `-pjrt`; `-v4` images are v4's before
2.15; the older `tpu-vm-pt-X.Y` images carry PyTorch and PyTorch/XLA X.Y. Which older
images boot on which generation is not stated by a public source; the emulator refuses a
version on a generation not listed here (tpu/rules.py).
"""

from __future__ import annotations

import re

from tpuctl.emulator.offerings.zones import generations

_OLD = ("v2", "v3")  # the images from before v4
_BASE = ("v2", "v3", "v4")  # tpu-ubuntu2204-base: "v4 and older"
_PJRT = ("v2", "v3", "v4", "v5e", "v5p", "v6e")  # TensorFlow 2.15+ with PJRT: every one


def _tensorflow(version: str, pjrt: bool = True) -> dict[str, tuple[str, ...]]:
    """One TensorFlow release's images, single-host and pod (PJRT, and SE when `pjrt`
    is False)."""
    device = "-pjrt" if pjrt else "-se"
    fits = _PJRT if pjrt else _OLD
    return {f"tpu-vm-tf-{version}{device}": fits, f"tpu-vm-tf-{version}-pod{device}": fits}


# runtime version -> the generations it boots on
RUNTIMES: dict[str, tuple[str, ...]] = {
    "tpu-ubuntu2204-base": _BASE,
    "tpu-vm-base": _OLD,
    "tpu-vm-pt-2.0": _OLD,
    "tpu-vm-tf-2.10.0": _OLD,
    "tpu-vm-tf-2.10.0-pod": _OLD,
    "tpu-vm-tf-2.10.0-v4": ("v4",),
    "tpu-vm-tf-2.10.0-pod-v4": ("v4",),
    "tpu-vm-tf-2.14.0": _OLD,
    "tpu-vm-tf-2.14.0-pod": _OLD,
    **_tensorflow("2.15.0"),
    **_tensorflow("2.15.0", pjrt=False),
    **_tensorflow("2.16.0"),
    **_tensorflow("2.16.0", pjrt=False),
    **_tensorflow("2.17.0"),
    **_tensorflow("2.18.0"),
    "v2-alpha": _OLD,
    "v2-alpha-pod": _OLD,
    "v2-alpha-tpuv4": ("v4",),
    "v2-alpha-tpuv4-pod": ("v4",),
    "v2-alpha-tpuv5-lite": ("v5e",),
    "v2-tpuv5-litepod": ("v5e",),  # the default of Google's python-docs-samples for v5e
    "v2-alpha-tpuv5": ("v5p",),
    "v2-alpha-tpuv6e": ("v6e",),
}


def runtime_versions(zone: str) -> list[str]:
    """The runtime versions offered in `zone`: those that boot on a generation it offers."""
    offered = set(generations(zone))
    return [version for version, fits in RUNTIMES.items() if offered & set(fits)]


_TF_IMAGE = re.compile(r"tpu-vm-tf-(\d+\.\d+\.\d+)(?:-pod)?(?:-pjrt|-se|-v4)?")
_PT_IMAGE = re.compile(r"tpu-vm-pt-(\d+\.\d+(?:\.\d+)?)(?:-pod)?")


def distributions(runtime_version: str) -> dict[str, str]:
    """What an image has installed, pip distribution -> version (`tpu-vm-tf-2.16.0-pjrt`
    -> tensorflow 2.16.0; the base images -> nothing): an emulated worker's site-packages."""
    tf = _TF_IMAGE.fullmatch(runtime_version)
    if tf:
        return {"tensorflow": tf.group(1)}
    pt = _PT_IMAGE.fullmatch(runtime_version)
    if pt:
        return {"torch": pt.group(1), "torch-xla": pt.group(1)}
    return {}
