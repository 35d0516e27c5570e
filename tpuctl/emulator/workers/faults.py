"""What an emulated worker has installed, and the faults `tpuctl doctor NODE` looks for,
planted on a worker from the control plane (`POST /_emulator/v1/worker-fault`).

The image: every worker gets `<worker dir>/site-packages` on its PYTHONPATH, with a
`<name>-<version>.dist-info` folder for each framework the node's runtime version
carries (offerings/runtimes.py: `tpu-vm-tf-2.16.0-pjrt` -> tensorflow 2.16.0; the base
images -> none). Only the metadata is there, not the packages: `importlib.metadata` sees
the image's framework, `import tensorflow` still fails. And `<worker dir>/bin` comes
first on its PATH, where a fault may put a command of its own.

Faults (kind, per worker):
- `stale-lockfile`: an empty `/tmp/libtpu_lockfile` in the worker's root, whose owner
  is gone (as a killed libtpu process leaves it);
- `no-device`: the worker's TPU device files (/dev/accel* or /dev/vfio/*, files.py)
  vanish, as after a stop/start that did not bring the chips back; commands started
  afterwards see none, and they stay gone until the node is made again (a new folder);
- `unhealthy` (a TPU API node's, workers/calls.py): the node's `health` becomes `health`
  (UNHEALTHY_TENSORFLOW unless given) and its `symptoms` the `symptoms` given (one
  MESH_BUILD_FAIL of this worker unless given). A Compute Engine instance has no
  health or symptoms field (`instances` in compute.v1: its `status` and
  `resourceStatus` only; `reportHostAsFaulty` is the user's report to the cloud, not
  the cloud's to the user), so the kind is refused on a Compute Engine TPU VM;
- `tpu-init-fails`: the worker's TPU runtime fails to start: its libtpu stand-in
  (libtpu_sdk.py) raises, at import, the error JAX reports for a TPU that will not come
  up ("TPU initialization failed: ..."), so a program that starts the TPU ends non-zero
  before its first step; it stays until the node is made again (a new folder);
- `tpu-held`: a process of the worker that holds its first TPU device open and sleeps
  (an idle holder); it goes with the worker's other processes;
- `tpu-busy`: the same, but it writes its device every half second, which the
  emulator's Monitoring counts as its TensorCore working (monitoring/models.py), while its CPU
  stays idle: a training process waiting on its TPU;
- `disk-full`: a `df` in the worker's bin that reports every file system 100% used (the
  emulator shares the machine's disk: this is the honest minimum that makes a full disk
  visible, to `df` users only);
- `package`: install (`version`) or remove (`version` null) a distribution's metadata.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tpuctl.emulator.core import errors
from tpuctl.emulator.core.errors import ApiError
from tpuctl.emulator.offerings import runtimes
from tpuctl.emulator.tpu.models import Node
from tpuctl.emulator.workers import libtpu_sdk
from tpuctl.emulator.workers.files import NO_DEVICE, WorkerFiles
from tpuctl.emulator.workers.sandbox import Refused

KINDS = (
    "stale-lockfile",
    "tpu-init-fails",
    "no-device",
    "unhealthy",
    "tpu-held",
    "tpu-busy",
    "disk-full",
    "package",
)
NO_HEALTH = (
    "a Compute Engine VM has no health or symptoms field (the unhealthy fault is a TPU API node's)"
)
UNHEALTHY = "UNHEALTHY_TENSORFLOW"
_DIST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_FULL_DF = """#!/bin/sh
# tpuctl emulator: a full disk (worker fault disk-full)
echo "Filesystem     1024-blocks      Used Available Capacity Mounted on"
for p in "$@"; do case "$p" in -*) continue;; esac
  echo "/dev/root        101430960 101430960         0     100% /"; done
"""


def site_packages(workers: WorkerFiles, node: Node, worker: int) -> Path:
    return workers.worker_dir(node, worker) / "site-packages"


def bin_dir(workers: WorkerFiles, node: Node, worker: int) -> Path:
    return workers.worker_dir(node, worker) / "bin"


def environment(workers: WorkerFiles, node: Node, worker: int, env: dict[str, str]) -> None:
    """Add the image's site-packages and the worker's bin to a worker's environment."""
    env["PYTHONPATH"] = str(site_packages(workers, node, worker))
    env["PATH"] = str(bin_dir(workers, node, worker)) + os.pathsep + env.get("PATH", "")


def install_image(workers: WorkerFiles, node: Node, worker: int) -> None:
    """The image's frameworks, once (a package removed by a fault stays removed)."""
    site = site_packages(workers, node, worker)
    bin_dir(workers, node, worker).mkdir(parents=True, exist_ok=True)
    if site.is_dir():
        return
    site.mkdir(parents=True)
    for name, version in runtimes.distributions(node.runtime_version).items():
        set_package(site, name, version)


def set_package(site: Path, name: str, version: str | None) -> None:
    normal = re.sub(r"[-_.]+", "_", name).lower()
    for old in site.glob("*.dist-info"):
        dist = old.name.removesuffix(".dist-info").rsplit("-", 1)[0]
        if re.sub(r"[-_.]+", "_", dist).lower() == normal:
            shutil.rmtree(old)
    if version is None:
        return
    info = site / f"{normal}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def plant(
    workers: WorkerFiles, node: Node, worker: int, body: dict[str, Any], env: dict[str, str]
) -> dict:
    """Plant one fault on a worker of a READY node; what was done."""
    kind = body.get("kind")
    if kind not in KINDS:
        raise errors.invalid_argument(f"kind must be one of {list(KINDS)}")
    if node.state != "READY":
        raise errors.failed_precondition(f"Node {node.name} is in state {node.state}, not READY.")
    wdir = workers.worker_dir(node, worker)
    workers.prepare(node, worker)
    install_image(workers, node, worker)
    if kind == "stale-lockfile":
        (wdir / "root" / "tmp" / "libtpu_lockfile").write_bytes(b"")
        return {"kind": kind, "worker": worker, "path": "/tmp/libtpu_lockfile"}
    if kind == "no-device":
        (wdir / NO_DEVICE).write_text("")
        gone = [f"/dev/{p.relative_to(wdir / 'dev')}" for p in workers.devices(node, worker)]
        for device in workers.devices(node, worker):
            device.unlink(missing_ok=True)
        return {"kind": kind, "worker": worker, "removed": gone}
    if kind == "tpu-init-fails":
        libtpu_sdk.fail_init(site_packages(workers, node, worker), libtpu_sdk.INIT_ERROR)
        return {"kind": kind, "worker": worker, "error": libtpu_sdk.INIT_ERROR}
    if kind == "disk-full":
        df = bin_dir(workers, node, worker) / "df"
        df.write_text(_FULL_DF)
        df.chmod(0o755)
        return {"kind": kind, "worker": worker}
    if kind == "package":
        name, version = body.get("package"), body.get("version")
        if not isinstance(name, str) or not _DIST.match(name):
            raise errors.invalid_argument("package is a distribution name, e.g. tensorflow")
        if version is not None and not (isinstance(version, str) and _DIST.match(version)):
            raise errors.invalid_argument("version is a version string, or null to remove")
        set_package(site_packages(workers, node, worker), name, version)
        return {"kind": kind, "worker": worker, "package": name, "version": version}
    return _hold(workers, node, worker, env, busy=kind == "tpu-busy")


def unhealthy(name: str, worker: int, body: dict[str, Any]) -> dict[str, Any]:
    """The node-state change (control/api.py) an `unhealthy` fault on `worker` makes."""
    symptom = {
        "symptomType": "MESH_BUILD_FAIL",
        "details": f"the TPU mesh could not be built on worker {worker}",
        "workerId": str(worker),
    }
    change = {
        "node": name,
        "health": body.get("health", UNHEALTHY),
        "symptoms": body.get("symptoms", [symptom]),
    }
    if "healthDescription" in body:
        change["healthDescription"] = body["healthDescription"]
    return change


def _hold(workers: WorkerFiles, node: Node, worker: int, env: dict[str, str], busy: bool) -> dict:
    device = str(workers.devices(node, worker)[0])
    if busy:  # written before it says so: the next sample sees the work
        code = (
            "import sys, time\n"
            f"f = open({device!r}, 'ab')\n"
            "f.write(b'100\\n'); f.flush()\n"
            "print('holding', flush=True)\n"
            "while True:\n"
            "    time.sleep(0.5); f.write(b'100\\n'); f.flush()\n"
        )
    else:
        code = (
            "import sys, time\n"
            f"f = open({device!r}, 'rb')\n"
            "print('holding', flush=True)\n"
            "while True: time.sleep(3600)\n"
        )
    try:
        argv = [sys.executable, "-c", code]
        proc = workers.start(node, worker, env, argv, subprocess.PIPE, subprocess.DEVNULL)
    except Refused as exc:
        raise errors.failed_precondition(str(exc)) from None
    assert proc.stdout is not None
    said = proc.stdout.readline()  # it holds the device once it says so
    if not said:
        raise ApiError(500, "INTERNAL", f"the process holding {device} did not start")
    return {"kind": "tpu-busy" if busy else "tpu-held", "worker": worker, "device": device}
