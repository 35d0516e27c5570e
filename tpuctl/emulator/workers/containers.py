"""Each emulated worker's Docker daemon: what the worker's `docker` (docker_cli.py) asks.

A daemon per worker, in the emulator's process, listens on a unix socket that is the
worker's /var/run/docker.sock (a file in the worker's root, only the emulator's user may
open it). A request is one JSON line (with the CLI's stdin, stdout and stderr for `run`);
the answer, JSON lines of `out`/`err` text and the `exit` status.

Images are pulled through the emulator's registry with the credentials the CLI sends
(images.py). A container is started from outside the worker's sandbox (bwrap cannot nest
there): bwrap with a fresh copy of the image's root as `/`, a procfs, a minimal /dev
with the worker's TPU device files (as the worker has them now), the `-v` binds (worker
paths, within the worker's folder only), the machine's network and the worker's
hostname, the environment docker gives (the image's, then -e), without any capability,
in the worker's PID namespace: its processes are the worker's, and end with it (as
`--pid=host` has it, with or without the flag; `--pid=container:NAME` is refused). The CLI's
signals are sent to the container's main process; its status is the CLI's (128+N when
killed by signal N). Where the workers are not sandboxed (`--unconfined`), `run` is refused.
"""

from __future__ import annotations

import array
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tpuctl.emulator.workers import images
from tpuctl.emulator.workers.container_spec import Container, Refusal, binds, process
from tpuctl.emulator.workers.sandbox import Refused, Sandbox

_MAX_REQUEST = 1 << 20
_DAEMON = "Error response from daemon: "
_RUNNING = "container is running: stop the container before removing or force remove"


class Daemon:
    """The daemon of one worker (`wdir`), its images in `store`."""

    def __init__(self, daemons: Daemons, wdir: Path, store: Path) -> None:
        self.daemons, self.wdir = daemons, wdir
        self.images = images.Store(store)
        self.containers: dict[str, Container] = {}
        self._lock = threading.Lock()
        path = wdir / "root" / "var" / "run" / "docker.sock"
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:  # a short path whatever the folder's length (a unix socket's is 108 bytes)
            self.sock.bind(f"/proc/self/fd/{folder}/docker.sock")
        finally:
            os.close(folder)
        os.chmod(path, 0o600)
        self.sock.listen(16)
        threading.Thread(target=self._accept, name="tpuctl-docker", daemon=True).start()

    def close(self, drop: bool = False) -> None:
        """Stop serving and kill the containers; `drop`: the images too (the VM is gone)."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self.kill(signal.SIGKILL)
        if drop:
            self.images.drop()

    def kill(self, sig: int) -> None:
        with self._lock:
            running = list(self.containers.values())
        for container in running:
            container.signal(sig, tree=sig == signal.SIGKILL)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        fds: list[int] = []
        with conn:
            try:
                request, rest = _receive(conn, fds)
                status = self._dispatch(request, fds, conn, rest)
            except Refusal as exc:
                op = request.get("op") if "request" in locals() else None
                text = f"docker: Error response from daemon: {exc}\nSee 'docker run --help'.\n"
                _reply(conn, err=text if op == "run" else f"Error response from daemon: {exc}\n")
                status = exc.status
            except (OSError, ValueError) as exc:
                _reply(conn, err=f"Error response from daemon: {exc}\n")
                status = 1
            finally:
                for fd in fds:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            with contextlib.suppress(OSError):
                _reply(conn, exit=status)

    def _dispatch(
        self, request: dict[str, Any], fds: list[int], conn: socket.socket, rest: bytes
    ) -> int:
        op = request.get("op")
        if op == "login":
            images.login(self.daemons.registry(), str(request["host"]), str(request["auth"]))
            return 0
        if op == "pull":
            self._pull(
                str(request["image"]), request.get("auth"), lambda s: _reply(conn, out=s + "\n")
            )
            return 0
        if op == "inspect":
            return self._inspect(conn, request)
        if op == "kill" or op == "rm":
            return self._kill(conn, request)
        if op == "ps":
            return self._ps(conn, request)
        if op == "run" and len(fds) == 3:
            return self._run(request, fds, conn, rest)
        raise Refusal(f"unknown request {op!r}", 1)

    def _pull(self, image: str, auth: Any, say: Callable[[str], None]) -> None:
        try:
            self.images.pull(
                image, auth if isinstance(auth, str) else None, self.daemons.registry(), say
            )
        except images.ImageError as exc:
            raise Refusal(str(exc), 1) from exc

    def _inspect(self, conn: socket.socket, request: dict[str, Any]) -> int:
        if request.get("format") != "{{json .Config}}":
            raise Refusal("the emulated docker formats only '{{json .Config}}'", 1)
        status = 0
        for image in request.get("images") or []:
            folder = self.images.image(str(image))
            if folder is None:
                _reply(conn, err=f"Error: No such image: {image}\n")
                status = 1
            else:
                _reply(conn, out=json.dumps(images.config_of(folder)) + "\n")
        return status

    def _kill(self, conn: socket.socket, request: dict[str, Any]) -> int:
        rm = request["op"] == "rm"
        try:
            name = str(request.get("signal") or "KILL").upper().removeprefix("SIG")
            sig = int(name) if name.isdigit() else int(signal.Signals[f"SIG{name}"])
        except KeyError:
            raise Refusal(f"Invalid signal: {request.get('signal')}", 1) from None
        status = 0
        for name in request.get("names") or []:
            with self._lock:
                found = self.containers.get(name) or next(
                    (c for c in self.containers.values() if c.id.startswith(str(name))), None
                )
            if found is None:
                if not (rm and request.get("force")):
                    what = "" if rm else f"Cannot kill container: {name}: "
                    _reply(conn, err=f"{_DAEMON}{what}No such container: {name}\n")
                    status = 1
                continue
            if rm and not request.get("force"):
                _reply(conn, err=f'{_DAEMON}cannot remove container "/{name}": {_RUNNING}\n')
                status = 1
                continue
            found.signal(signal.SIGKILL if rm else sig, tree=rm or sig == signal.SIGKILL)
            if rm:
                found.ended.wait(10)
            _reply(conn, out=f"{name}\n")
        return status

    def _ps(self, conn: socket.socket, request: dict[str, Any]) -> int:
        wanted = []
        for spec in request.get("filters") or []:
            key, _, value = str(spec).partition("=")
            if key != "name":
                raise Refusal(f"invalid filter '{spec}'", 1)
            wanted.append(value)
        with self._lock:
            running = list(self.containers.values())
        lines = []
        for container in running:
            if all(_matches(pattern, container.name) for pattern in wanted):
                lines.append(
                    container.id[:12]
                    if request.get("quiet")
                    else f"{container.id[:12]}   {container.name}"
                )
        if not request.get("quiet"):
            lines.insert(0, "CONTAINER ID   NAMES")
        _reply(conn, out="".join(f"{line}\n" for line in lines))
        return 0

    # -- run ------------------------------------------------------------------------
    def _run(
        self, request: dict[str, Any], fds: list[int], conn: socket.socket, rest: bytes
    ) -> int:
        image = str(request["image"])
        if self.daemons.sandbox.mode != "bwrap":
            raise Refusal(
                "the emulated docker runs containers only in sandboxed workers (bubblewrap); "
                "this emulator runs its workers unconfined"
            )
        if request.get("net") not in ("host", None):
            raise Refusal(
                f"network {request.get('net')} not found (the emulated docker has only --net=host)"
            )
        if request.get("pid") not in ("host", None):  # container:NAME
            raise Refusal(
                f"cannot join the PID namespace of {str(request['pid'])[10:]!r} (the emulated "
                "docker has only --pid=host)"
            )
        folder = self.images.image(image)
        if folder is None:
            say = _writer(fds[2])
            say(f"Unable to find image '{image}' locally")
            try:
                self._pull(image, request.get("auth"), say)
            except Refusal as exc:  # docker run's own failure
                raise Refusal(str(exc)) from exc
            folder = self.images.image(image)
            assert folder is not None
        config = images.config_of(folder)
        name = str(request.get("name") or f"emulated_{secrets.token_hex(4)}")
        container = Container(secrets.token_hex(32), name)
        with self._lock:
            if name in self.containers:
                other = self.containers[name].id
                raise Refusal(
                    f'Conflict. The container name "/{name}" is already in use by container '
                    f'"{other}". You have to remove (or rename) that container to be able to '
                    "reuse that name."
                )
            self.containers[name] = container
        work = self.images.folder / "containers" / container.id
        try:
            root = str(work / "root")
            work.mkdir(parents=True)
            subprocess.run(
                ["cp", "-a", str(folder / "rootfs"), root], check=True, capture_output=True
            )
            mounts = binds(self.wdir, request, self.daemons.sandbox.read_only())
            argv, env, cwd = process(config, request, root, mounts)
            with self.daemons.sandbox.container(
                self.wdir, root, argv, mounts, cwd, request.get("hostname")
            ) as cmd:
                container.proc = subprocess.Popen(
                    cmd.argv,
                    stdin=fds[0],
                    stdout=fds[1],
                    stderr=fds[2],
                    env=env,
                    cwd="/",
                    start_new_session=True,
                    pass_fds=cmd.fds,
                )
            for fd in fds:
                os.close(fd)
            fds.clear()
            threading.Thread(
                target=self._forward, args=(conn, container, rest), daemon=True
            ).start()
            returncode = container.proc.wait()
            return 128 - returncode if returncode < 0 else returncode
        except (Refused, subprocess.CalledProcessError) as exc:
            raise Refusal(str(exc)) from exc
        finally:
            container.ended.set()
            with self._lock:
                if self.containers.get(name) is container:
                    del self.containers[name]
            shutil.rmtree(work, ignore_errors=True)

    def _forward(self, conn: socket.socket, container: Container, rest: bytes) -> None:
        """The CLI's signals (JSON lines after the request) to the container."""
        buffer = rest
        while not container.ended.is_set():
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                with contextlib.suppress(ValueError, TypeError, KeyError):
                    container.signal(int(json.loads(line)["signal"]))
            try:
                chunk = conn.recv(4096)
            except OSError:
                return
            if not chunk:
                return
            buffer += chunk


def _writer(fd: int) -> Callable[[str], None]:
    def write(line: str) -> None:
        os.write(fd, f"{line}\n".encode())

    return write


def _matches(pattern: str, name: str) -> bool:
    """docker's `name` filter: a regular expression searched in the name."""
    try:
        return re.search(pattern, name) is not None
    except re.error:
        return pattern in name


def _receive(conn: socket.socket, fds: list[int]) -> tuple[dict[str, Any], bytes]:
    """The request line (and the descriptors sent with it); what came after it."""
    data = b""
    size = socket.CMSG_SPACE(3 * array.array("i").itemsize)
    while b"\n" not in data:
        chunk, ancillary, _, _ = conn.recvmsg(65536, size)
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                got = array.array("i")
                got.frombytes(payload[: len(payload) - len(payload) % got.itemsize])
                fds += list(got)
        if not chunk or len(data) > _MAX_REQUEST:
            raise ValueError("the request was cut short")
        data += chunk
    line, rest = data.split(b"\n", 1)
    request = json.loads(line)
    if not isinstance(request, dict):
        raise ValueError("a request is a JSON object")
    return request, rest


def _reply(conn: socket.socket, **message: Any) -> None:
    conn.sendall(json.dumps(message).encode() + b"\n")


class Daemons:
    """The daemons of every worker of the emulator (WorkerFiles starts and ends them)."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.endpoints: dict[str, str] = {}  # the backend's front_endpoints (`registry`)
        self._daemons: dict[str, Daemon] = {}
        self._lock = threading.Lock()

    def registry(self) -> str | None:
        return self.endpoints.get("registry")

    def serve(self, wdir: Path) -> None:
        """The worker's daemon (started once); its images in `<wdir>-docker`."""
        with self._lock:
            if str(wdir) not in self._daemons:
                self._daemons[str(wdir)] = Daemon(self, wdir, wdir.parent / f"{wdir.name}-docker")

    def kill(self, which: Callable[[str], bool], sig: int) -> None:
        """`sig` to the containers of the workers whose folders `which` accepts."""
        with self._lock:
            found = [d for key, d in self._daemons.items() if which(key)]
        for daemon in found:
            daemon.kill(sig)

    def end(self, which: Callable[[str], bool], drop: bool = False) -> None:
        """Stop the daemons (and containers) of the workers whose folders `which` accepts;
        `drop`: their images too (the VMs are deleted)."""
        with self._lock:
            ending = [self._daemons.pop(key) for key in list(self._daemons) if which(key)]
        for daemon in ending:
            daemon.close(drop)
