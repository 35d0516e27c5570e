"""libtpu's SDK in an emulated worker's image: a stand-in `libtpu` package in the worker's
site-packages (on its PYTHONPATH, workers/faults.py), with the surface Google's `tpu-info`
reads TensorCore utilisation through (github.com/AI-Hypercomputer/cloud-accelerator-
diagnostics, tpu_info/tpu_info/cli_helper.py `TensorCoreUtilizationTable.render`):
`from libtpu import sdk; sdk.tpumonitoring.get_metric("tensorcore_util").data()`, a list of
per-chip percentages (tpu-info prints each as `f"{value}%"`; its README shows `13.60%`,
so text with two decimals is given here).

The values are the worker's chips' (workers/chips.py, set by `EmulatorControl.set_chips`),
kept current in a file beside the package that the stand-in reads on each call, so any
process of the worker reads them, as tpu-info does beside the workload. A worker set
without the SDK (`set_chips(..., sdk=False)`) has no `libtpu` package at all.

A worker with the fault `tpu-init-fails` (workers/faults.py) has its TPU runtime fail
to start: importing the stand-in, as JAX does when it starts its TPU backend, raises
JAX's RuntimeError (`INIT_ERROR`), so a program
that uses the TPU ends non-zero before its first step.

The stand-in is text written into the worker's folder: neither the emulator nor tpuctl
imports it.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

PACKAGE = "libtpu"
VALUES = "_tpuctl_emulated_chips.json"  # beside the package's modules
INIT_FAILS = "_tpuctl_init_fails"  # beside them: the TPU runtime's error (fault tpu-init-fails)
# What JAX raises when libtpu cannot start the TPU (jax/_src/xla_bridge.py `backends()`:
# "Unable to initialize backend 'tpu': " and libtpu's status, as reported on
# github.com/jax-ml/jax/issues/21761 and /30834: "UNKNOWN: TPU initialization failed: ...",
# "Failed to initialize TPU system with error: FAILED_PRECONDITION: Couldn't mmap: ...").
INIT_ERROR = (
    "Unable to initialize backend 'tpu': UNKNOWN: TPU initialization failed: Failed to "
    "initialize TPU system with error: FAILED_PRECONDITION: Couldn't mmap: Operation not "
    "permitted"
)

# JAX asks an importable `libtpu` for `get_library_path()` when it is imported
# (jax/_src/cloud_tpu_init.py `get_tpu_library_path`: `libtpu_module.get_library_path()`),
# as libtpu's wheel has it: the path of its `libtpu.so`. Without it, every `import jax`
# warns "cloud_tpu_init failed: AttributeError ... This a JAX bug"; with it, JAX finds no
# TPU chip on the worker's PCI bus and uses the CPU quietly (the stand-in has no `.so`).
_INIT = '''"""tpuctl emulator: a stand-in for libtpu, with its SDK's monitoring only."""

import os

_FAILS = os.path.join(os.path.dirname(os.path.abspath(__file__)), %(fails)r)
if os.path.exists(_FAILS):  # this worker's TPU runtime does not start
    with open(_FAILS) as _f:
        raise RuntimeError(_f.read().strip())


def get_library_path():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "libtpu.so")
'''

_SDK = '''"""tpuctl emulator: a stand-in for libtpu's SDK, its monitoring of TensorCore use."""

import json
import os

_VALUES = os.path.join(os.path.dirname(os.path.abspath(__file__)), %(values)r)


class Metric:
    def __init__(self, name, values):
        self._name, self._values = name, values

    def name(self):
        return self._name

    def data(self):
        return list(self._values)


class _Monitoring:
    @staticmethod
    def list_supported_metrics():
        return ["tensorcore_util"]

    @staticmethod
    def get_metric(name):
        if name != "tensorcore_util":
            raise ValueError("metric %%r is not supported" %% (name,))
        with open(_VALUES) as f:
            values = json.load(f)
        return Metric(name, ["%%.2f" %% v for v in values])


tpumonitoring = _Monitoring()
'''


def publish(site: Path, values: list[float] | None) -> None:
    """Put the stand-in and the worker's values into `site`; None: take the package away."""
    package = site / PACKAGE
    if values is None:
        shutil.rmtree(package, ignore_errors=True)
        return
    package.mkdir(parents=True, exist_ok=True)
    init = _INIT % {"fails": INIT_FAILS}
    for name, text in (("__init__.py", init), ("sdk.py", _SDK % {"values": VALUES})):
        if not (package / name).is_file() or (package / name).read_text() != text:
            (package / name).write_text(text)
    fresh = package / f"{VALUES}.{os.getpid()}"
    fresh.write_text(json.dumps(values))
    os.replace(fresh, package / VALUES)  # a reader sees the old values or the new


def fail_init(site: Path, why: str | None) -> None:
    """Make the worker's TPU runtime fail to start with `why` (None: start again)."""
    flag = site / PACKAGE / INIT_FAILS
    if why is None:
        flag.unlink(missing_ok=True)
        return
    flag.parent.mkdir(parents=True, exist_ok=True)
    flag.write_text(why + "\n")
