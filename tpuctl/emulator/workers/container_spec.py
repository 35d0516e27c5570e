"""What a container of an emulated worker's docker daemon (containers.py) is made of:
its main process (argv, environment, working folder), as docker makes them from the
image's config and `run`'s options, and its binds, the worker's paths mapped to this
machine's, refused when they are not the worker's own."""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tpuctl.emulator.workers import images
from tpuctl.emulator.workers.pidns import children

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_HIDDEN = ("/proc", "/dev", "/sys")  # a -v from these is not the worker's to give


class Refusal(Exception):
    """A request the daemon refuses: `docker` prints it, exits `status`."""

    def __init__(self, message: str, status: int = 125) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Container:
    id: str
    name: str
    proc: subprocess.Popen[bytes] | None = None
    ended: threading.Event = field(default_factory=threading.Event)

    def main_pid(self) -> int | None:
        """The container's main process: under bwrap (and bwrap's init, if it has one)."""
        pid = self.proc.pid if self.proc else None
        while pid is not None:
            try:
                exe = os.readlink(f"/proc/{pid}/exe")
            except OSError:
                return None
            if os.path.basename(exe) != "bwrap":
                return pid
            below = children(pid)
            pid = below[0] if below else None
        return None

    def signal(self, sig: int, tree: bool = False) -> None:
        """`sig` to the main process (with `tree`, to everything under bwrap too)."""
        main = self.main_pid()
        targets = [main] if main is not None else []
        if tree and self.proc is not None:
            frontier = [self.proc.pid]
            while frontier:
                frontier = [c for pid in frontier for c in children(pid)]
                targets += frontier
        for pid in targets:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)


def binds(wdir: Path, request: dict[str, Any], foreign: list[str]) -> list[str]:
    """bwrap's binds for `run`'s -v and --device, of the worker whose folder is `wdir`
    (`foreign`: where the worker sees the machine's files)."""
    binds: list[str] = []
    for spec in request.get("volumes") or []:
        parts = str(spec).split(":")
        if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] not in ("ro", "rw")):
            raise Refusal(f"invalid volume specification: '{spec}'")
        if not parts[0].startswith("/"):
            raise Refusal(f"the emulated docker has no named volumes: '{spec}'")
        host = worker_path(wdir, parts[0], foreign, create=True)
        binds += ["--ro-bind" if parts[2:] == ["ro"] else "--bind", host, parts[1]]
    for spec in request.get("devices") or []:
        parts = str(spec).split(":")
        host = worker_path(wdir, parts[0], foreign, create=False, device=True)
        if not os.path.exists(host):
            raise Refusal(
                "error gathering device information while adding custom device "
                f'"{parts[0]}": no such file or directory'
            )
        if host.startswith(str(wdir)) and len(parts) > 1 and parts[1] != parts[0]:
            binds += ["--bind", host, parts[1]]  # the worker's own are there already
    return binds


def worker_path(
    wdir: Path, path: str, foreign: list[str], create: bool, device: bool = False
) -> str:
    """The machine's path of a worker's path, refused when it is not the worker's."""
    path, folder = os.path.normpath(path), str(wdir)
    if device and path.startswith("/dev/"):
        own = os.path.join(folder, "dev", path[5:])
        return path if path in _BASIC_DEVICES and not os.path.exists(own) else own
    if path == folder or path.startswith(folder + "/"):
        host = path
    elif any(path == p or path.startswith(p.rstrip("/") + "/") for p in [*_HIDDEN, *foreign]):
        raise Refusal(f"invalid mount config: {path} is not the worker's own to bind")
    else:  # in the worker's root, its links followed as the worker sees them
        host = images.resolve(os.path.join(folder, "root"), path, follow_last=True)
    real = os.path.realpath(host)
    if not (real == folder or real.startswith(folder + "/")):
        raise Refusal(f"invalid mount config: {path} leads out of the worker's folder")
    if create and not os.path.lexists(real):
        os.makedirs(real)  # as docker makes a missing source folder
    return real


_OCI = (
    "failed to create task for container: failed to create shim task: OCI runtime create "
    "failed: runc create failed: unable to start container process: exec: "
)
_BASIC_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")


def process(
    config: dict[str, Any], request: dict[str, Any], root: str, mounts: list[str] | None = None
) -> tuple[list[str], dict[str, str], str]:
    """(argv, environment, working folder) of the container's main process, as docker
    makes them from the image's config and `run`'s options (`mounts`: `binds`', where
    the program may be, as runc finds it once the mounts are made)."""
    entrypoint = config.get("Entrypoint") or []
    cmd = config.get("Cmd") or []
    if request.get("entrypoint") is not None:
        entrypoint = [request["entrypoint"]] if request["entrypoint"] else []
        cmd = []
    if request.get("args"):
        cmd = list(request["args"])
    argv = [str(a) for a in [*entrypoint, *cmd]]
    if not argv:
        raise Refusal("No command specified")
    env = {"PATH": DEFAULT_PATH, "HOSTNAME": str(request.get("hostname") or "localhost")}
    for item in [*(config.get("Env") or []), *(request.get("env") or [])]:
        key, _, value = str(item).partition("=")
        env[key] = value
    env.setdefault("HOME", "/root")
    cwd = str(request.get("workdir") or config.get("WorkingDir") or "/")
    os.makedirs(images.resolve(root, cwd, follow_last=True), exist_ok=True)
    program = _find(root, argv[0], env["PATH"], cwd, mounts or [])
    oci = _OCI
    if program is None:
        raise Refusal(f'{oci}"{argv[0]}": executable file not found in $PATH: unknown', 127)
    if not os.access(program, os.X_OK) or os.path.isdir(program):
        raise Refusal(f'{oci}"{argv[0]}": permission denied: unknown', 126)
    return argv, env, cwd


def _find(root: str, program: str, path: str, cwd: str, mounts: list[str]) -> str | None:
    """The machine's path of the program the container runs: by $PATH, or a path (a
    relative one from the working folder, `./run.sh`), in a bind if one holds it."""
    candidates = [program] if "/" in program else [f"{d or '.'}/{program}" for d in path.split(":")]
    for candidate in candidates:
        inside = os.path.normpath(os.path.join(cwd, candidate))
        host = _bound(inside, mounts) or images.resolve(root, inside, follow_last=True)
        if os.path.exists(host):
            return host
    return None


def _bound(path: str, mounts: list[str]) -> str | None:
    """Where `path` is on the machine when a bind holds it (the last bind wins)."""
    triples = [mounts[i : i + 3] for i in range(0, len(mounts), 3)]
    for _, host, dest in reversed(triples):
        if path == dest or path.startswith(dest.rstrip("/") + "/"):
            return host + path[len(dest.rstrip("/")) :]
    return None
