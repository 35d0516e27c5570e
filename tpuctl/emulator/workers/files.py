"""The emulated worker VMs on disk: a home, a TPU device file and an SSH host key each.

Layout, under STATE_DIR/workers (or a temp dir when the emulator keeps no state):

    <node id>-<node uid>/w<k>/home/                    the worker's home directory
    <node id>-<node uid>/w<k>/root/                    the worker's `/` (sandbox.py)
    <node id>-<node uid>/w<k>/dev/accel0.. or vfio/0..  empty files standing for the TPU chips
                                                       (bound at /dev in the sandbox)
    <node id>-<node uid>/w<k>/ssh_host_{ed25519,ecdsa}_key   the worker's SSH host keys
    ssh_host_rsa_key                                   the RSA host key, one per emulator
    <node id>-<node uid>/w<k>/startup-script(.log)     the node's startup script, its output
    <node id>-<node uid>/w<k>-docker/                  the worker's container images (images.py)
    docker                                             the workers' `docker` (containers.py)

A recreated node has a new uid, so it gets a fresh folder and new host keys. Every
process started on a worker carries TPUCTL_EMULATOR_WORKER=<emulator>/<uid>/<k> in its
environment, which finds it (and whatever it spawned, even in a new session) when the
worker goes down. Whatever runs on a worker runs in its sandbox (sandbox.py): it writes
nowhere outside the worker's folder.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

from tpuctl.emulator.tpu.models import Node, tpu_vm_name
from tpuctl.emulator.workers import guest_env
from tpuctl.emulator.workers.containers import Daemons
from tpuctl.emulator.workers.sandbox import Refused, Sandbox

MARKER = "TPUCTL_EMULATOR_WORKER"
# algorithm -> (file, generation options, one per emulator). A TPU VM's guest publishes
# an RSA, an ECDSA and an Ed25519 key, as any Google Linux image's guest agent makes them.
# Here the 2048-bit RSA key is shared by every worker of the emulator: making one takes
# 50-100 ms of CPU (the others ~0.1 ms), which hundreds of nodes paid each; tpuctl and
# OpenSSH pick the Ed25519 key, which stays each worker's own.
# The generations whose chips a TPU VM shows as /dev/accel0..N-1; the later ones (v5e on)
# as VFIO groups /dev/vfio/0..N-1 (Ray's TPU accelerator manager counts either:
# github.com/ray-project/ray, python/ray/_private/accelerators/tpu.py).
ACCEL_GENERATIONS = ("v2", "v3", "v4")
NO_DEVICE = "no-device"  # in a worker's folder: its device files are gone (faults.py)


def device_names(generation: str, chips: int) -> list[str]:
    """A VM's TPU device files, relative to /dev: one per chip."""
    if generation in ACCEL_GENERATIONS:
        return [f"accel{i}" for i in range(chips)]
    return [f"vfio/{i}" for i in range(chips)]


HOST_KEYS: dict[str, tuple[str, dict[str, Any], bool]] = {
    "ssh-ed25519": ("ssh_host_ed25519_key", {}, False),
    "ecdsa-sha2-nistp256": ("ssh_host_ecdsa_key", {}, False),
    "ssh-rsa": ("ssh_host_rsa_key", {"key_size": 2048}, True),
}


class WorkerFiles:
    """Paths, environment and processes of the emulated workers."""

    def __init__(self, state_dir: Path | None, sandbox: Sandbox | None = None) -> None:
        self._state_dir = state_dir
        self.sandbox = sandbox or Sandbox()
        self.docker = Daemons(self.sandbox)  # each worker's docker daemon (containers.py)
        self._root: Path | None = None
        self._temp = False
        # tells this emulator's processes apart; begins with its pid, so that `emulator
        # stop` finds the workers of an emulator it had to SIGKILL (daemon.stop)
        self.instance = f"{os.getpid()}.{secrets.token_hex(4)}"

    @property
    def root(self) -> Path:
        if self._root is None:
            if self._state_dir is not None:
                self._root = self._state_dir / "workers"
                self._root.mkdir(parents=True, exist_ok=True)
            else:
                self._root = Path(tempfile.mkdtemp(prefix="tpuctl-emulator-workers-"))
                self._temp = True
        return self._root

    def node_dir(self, node: Node) -> Path:
        return self.root / f"{node.node_id}-{node.uid}"

    def worker_dir(self, node: Node, worker: int) -> Path:
        return self.node_dir(node) / f"w{worker}"

    def devices(self, node: Node, worker: int) -> list[Path]:
        acc = node.accelerator
        chips = max(1, acc.chips // max(1, acc.workers))
        dev = self.worker_dir(node, worker) / "dev"
        return [dev / name for name in device_names(acc.generation, chips)]

    def marker(self, node: Node, worker: int) -> str:
        return f"{self.node_marker(node)}/{worker}"

    def node_marker(self, node: Node) -> str:
        """What the markers of a node's workers begin with."""
        return f"{self.instance}/{node.uid}"

    def env(self, node: Node, worker: int, endpoint: str, config: dict[str, Any]) -> dict[str, str]:
        """What every process on the worker gets in its environment."""
        env = {
            "TPU_ACCELERATOR_TYPE": node.accelerator.name,
            "TPU_NAME": node.node_id,
            "HOME": str(self.worker_dir(node, worker) / "home"),
            "TPUCTL_TPU_DEVICES": ",".join(map(str, self.devices(node, worker))),
            MARKER: self.marker(node, worker),
            # One machine hosts every emulated worker: idle.py looks only at this one's.
            "TPUCTL_IDLE_SCOPE": f"{MARKER}={self.marker(node, worker)}",
            "TPUCTL_TPU_URL": f"http://{endpoint}",
            "TPUCTL_COMPUTE_URL": f"http://{endpoint}",
            "TPUCTL_CRM_URL": f"http://{endpoint}",  # Resource Manager's testIamPermissions
            "TPUCTL_MONITORING_URL": f"http://{endpoint}",  # timeSeries.list over REST
            "TPUCTL_METADATA_URL": f"http://{endpoint}/_emulator/v1/metadata/"
            f"{node.project}/{node.zone}/{node.node_id}/{worker}/computeMetadata/v1",
        }
        if getattr(node, "api", "tpu") != "compute":
            # A TPU API VM's shell has these (a Compute Engine VM's has not: its users,
            # and tpuctl's agent, set them; agent/job.py).
            env["TPU_WORKER_ID"] = str(worker)
            env["TPU_WORKER_HOSTNAMES"] = ",".join(node.addresses)
        # the VM's name, as `hostname` says it on a VM (bwrap's own UTS namespace: sandbox.py)
        vms = getattr(node, "vms", None) or []  # a Compute Engine VM or slice, worker order
        vm = vms[worker] if 0 <= worker < len(vms) else None
        env["HOSTNAME"] = vm.name if vm is not None else tpu_vm_name(node.uid, worker)
        if config.get("storage_endpoint"):
            env["TPUCTL_STORAGE_URL"] = str(config["storage_endpoint"])
        # The emulated VM's `python3`: a system Python, without the emulator's virtualenv
        # (guest_env.python)
        bin_dir = os.path.dirname(guest_env.python())
        env["PATH"] = bin_dir + os.pathsep + guest_env.SYSTEM_PATH
        return env

    def prepare(self, node: Node, worker: int) -> dict[str, str]:
        """Make the worker's folders and host keys (once); its private keys (OpenSSH) by
        algorithm."""
        wdir = self.worker_dir(node, worker)
        (wdir / "home").mkdir(parents=True, exist_ok=True)
        (wdir / "dev").mkdir(exist_ok=True)
        self.sandbox.prepare(wdir / "root")
        self._docker_cli()
        self.docker.serve(wdir)
        if not (wdir / NO_DEVICE).exists():  # gone for good once a fault took them
            for device in self.devices(node, worker):
                device.parent.mkdir(exist_ok=True)
                device.touch(exist_ok=True)
        keys = {}
        for algorithm, (name, options, shared) in HOST_KEYS.items():
            key_file = (self.root if shared else wdir) / name
            if not key_file.exists():
                import asyncssh

                key = asyncssh.generate_private_key(algorithm, **options)
                tmp = key_file.parent / f"{name}.{secrets.token_hex(4)}.tmp"  # one per maker
                tmp.write_bytes(key.export_private_key())
                tmp.chmod(0o600)
                os.replace(tmp, key_file)
            keys[algorithm] = key_file.read_text()
        return keys

    def _docker_cli(self) -> None:
        """The workers' `docker` (docker_cli.py under the workers' python3; sandbox.py
        binds it where the machine has its own)."""
        path = self.root / "docker"
        cli = Path(__file__).with_name("docker_cli.py")
        text = f'#!/bin/sh\nexec "{guest_env.python()}" -I -S "{cli}" "$@"\n'
        if not path.is_file() or path.read_text() != text:
            tmp = path.with_name(f"docker.{secrets.token_hex(4)}.tmp")
            tmp.write_text(text)
            tmp.chmod(0o755)
            os.replace(tmp, path)
        self.sandbox.docker_cli = str(path)

    def run_startup_script(self, node: Node, worker: int, env: dict[str, str]) -> int | None:
        """Run the node's `startup-script` metadata on a worker that just came up, as the
        guest does on every boot: a detached process in the worker's sandbox, with the
        worker's environment (so it goes with the worker's other processes). Output:
        <worker>/startup-script.log. Returns its pid (None: no script, or no sandbox)."""
        script = node.metadata.get("startup-script")
        if not script:
            return None
        wdir = self.worker_dir(node, worker)
        path = wdir / "startup-script"
        path.write_text(script)
        path.chmod(0o700)
        argv = [str(path)] if script.startswith("#!") else ["/bin/bash", str(path)]
        with open(wdir / "startup-script.log", "ab") as log:
            try:
                proc = self.start(node, worker, env, argv, log, subprocess.STDOUT)
            except Refused as exc:
                log.write(f"{exc}\n".encode())
                return None
        return proc.pid

    def start(
        self, node: Node, worker: int, env: dict[str, str], argv: list[str], out: Any, err: Any
    ) -> subprocess.Popen[bytes]:
        """A detached process on the worker: in its sandbox (and PID namespace), with a VM's
        environment and the worker's, in a session of its own, reaped when it ends; raises
        Refused when there is no sandbox and unconfined was not asked for."""
        environment = guest_env.base()
        environment.update(env)
        wdir = self.worker_dir(node, worker)
        with self.sandbox.command(wdir, env["HOME"], argv, env.get("HOSTNAME"), environment) as cmd:
            proc = subprocess.Popen(
                cmd.argv,
                cwd=env["HOME"],
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
                pass_fds=cmd.fds,
            )
        threading.Thread(target=proc.wait, daemon=True).start()
        return proc

    def remove_node(self, node_dir_name: str) -> None:
        # the VMs' docker goes with them, images and all: a new VM's starts empty
        self.docker.end(lambda wdir: Path(wdir).parent.name == node_dir_name, drop=True)
        shutil.rmtree(self.root / node_dir_name, ignore_errors=True)

    def node_dir_names(self) -> set[str]:
        try:
            return {p.name for p in self.root.iterdir() if p.is_dir()}
        except OSError:
            return set()

    def kill(
        self, uid: str | None = None, worker: int | None = None, sig: int = signal.SIGKILL
    ) -> int:
        """SIGKILL (or `sig`) the processes of one worker, of one node (by uid) or of every
        worker of this emulator; returns how many were signalled. A SIGKILL takes the
        workers down: their PID namespaces are ended first, and waited for, so that a
        worker started again at once gets a new one (sandbox.py); its containers get the
        signal too (containers.py)."""
        self.docker.kill(lambda wdir: _is_worker(Path(wdir), uid, worker), sig)
        if sig == signal.SIGKILL:
            self.sandbox.end_namespaces(lambda wdir: _is_worker(Path(wdir), uid, worker))
        if uid is None:
            return kill_marked(f"{self.instance}/", sig)
        if worker is None:
            return kill_marked(f"{self.instance}/{uid}/", sig)
        return kill_marked(f"{self.instance}/{uid}/{worker}\0", sig)

    def close(self) -> None:
        """End the workers' PID namespaces; remove the temporary workers dir, if one was
        made."""
        self.docker.end(lambda _: True)
        self.sandbox.close()
        if self._temp and self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None
            self._temp = False


def _is_worker(wdir: Path, uid: str | None, worker: int | None) -> bool:
    """Is `wdir` (<node id>-<node uid>/w<k>) the folder of that worker (None: any)?"""
    node_ok = uid is None or wdir.parent.name.endswith(f"-{uid}")
    return node_ok and (worker is None or wdir.name == f"w{worker}")


def kill_marked(prefix: str, sig: int = signal.SIGKILL) -> int:
    """SIGKILL (or `sig`) the processes whose environment has TPUCTL_EMULATOR_WORKER=<prefix>...
    (end `prefix` with NUL for an exact value). The environment is inherited, so this
    finds children that left their session too."""
    needle = f"\0{MARKER}={prefix}".encode()
    killed = 0
    me = os.getpid()
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = b"\0" + f.read()
        except OSError:
            continue
        if needle in environ:
            with contextlib.suppress(OSError):
                os.kill(int(entry), sig)
                killed += 1
    return killed
