"""Each emulated worker has a root of its own: what is sent to a worker stays in its folder.

Every process the emulator starts for a worker (SSH commands and shells, SFTP aside,
which maps paths instead; the node's startup script) runs under bubblewrap (`bwrap`):

    <worker dir>/root      bound read-write as `/` (so /tmp, /var, /home, /root are the worker's)
    /usr, /etc, /bin ...   the machine's, read-only (/bin, /lib... linked as on the host)
    the Python prefixes    read-only: the worker's `python3` is the emulator's interpreter
    /proc, /dev            the worker's own procfs (below), a minimal /dev, with the
                           worker's TPU device files bound where a TPU VM has them
                           (<worker dir>/dev/accel0.. at /dev/accel0.. on v2-v4,
                           <worker dir>/dev/vfio/0.. at /dev/vfio/0.. from v5e on:
                           files.py), those that are there when the command starts
    <worker dir>           bound read-write at its own path (HOME and TPUCTL_TPU_DEVICES name it)
    docker                 the emulated docker CLI (docker_cli.py) over the machine's
                           /usr/local/bin/docker and /usr/bin/docker; its daemon's socket
                           is the root's /var/run/docker.sock (containers.py)

Where the emulator may (it runs as root, and bwrap can make and join a PID namespace,
tried once), every worker has a PID namespace of its own, held by a `sleep` under bwrap's
init (`_Holder`) for as long as the worker runs: every command of the worker joins it, so
the worker's processes see each other (the agent, its job, a later `exec`) and nothing
else of the machine, and `/proc/<pid>/root` leads only into the worker's root. They also
run without any capability (`--cap-drop ALL`): root in the worker cannot mount, make
device nodes or write through the read-only binds. Pids a worker's launcher reports are
its namespace's; `host_pid` finds the machine's. As an ordinary user, the workers share
the machine's PID namespace and run as that user, with what that user may touch.

The network stays the machine's: workers reach the emulator and Cloud Storage on
127.0.0.1, and the emulator finds a worker's processes in the machine's /proc by their
TPUCTL_EMULATOR_WORKER variable (the holder carries it too).

Where bwrap is missing or cannot run here (checked once per bwrap path), worker commands
are refused unless the emulator was started with --unconfined (or
TPUCTL_EMULATOR_UNCONFINED=1): then they run as plain local processes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from tpuctl.emulator.workers import guest_env
from tpuctl.emulator.workers.pidns import HOLDER_ENV, Command, Holder, children, ns_pid

BWRAP_ENV = "TPUCTL_EMULATOR_BWRAP"  # the bwrap to use (tests point it at nothing)
UNCONFINED_ENV = "TPUCTL_EMULATOR_UNCONFINED"  # 1: run worker commands unconfined if need be
REFUSAL = (
    "tpuctl emulator: no sandbox for worker commands: install bubblewrap "
    "(apt-get install bubblewrap) or start the emulator with --unconfined"
)
# the host's top-level links into /usr (merged /usr), or folders to bind when they are not
_SYSTEM_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
# the worker's own folders in its root
_PRIVATE = {"tmp": 0o1777, "var": 0o755, "var/tmp": 0o1777, "var/log": 0o755, "home": 0o755}
# A procfs of the machine's PID namespace: mounted fresh where we may (root), else the
# host's bound (a user namespace may not mount a procfs of a namespace it does not own).
_PROC_CHOICES = (["--proc", "/proc"], ["--bind", "/proc", "/proc"])

_probed: dict[str, list[str] | str] = {}  # bwrap path -> its /proc options, or why it fails
_uts_probed: dict[str, bool] = {}  # bwrap path -> whether --unshare-uts works
_pidns_probed: dict[str, bool] = {}  # bwrap path -> whether workers get PID namespaces
_pidns_lock = threading.Lock()
_NO_CAPS = ("--cap-drop", "ALL")  # as root: a worker's root may not mount, mknod, ...
# where the worker's `docker` (containers.py) is bound over the machine's; /snap/bin (on a
# VM's PATH, in the worker's own root) when the machine has neither
_DOCKER_PATHS = ("/usr/local/bin/docker", "/usr/bin/docker")
_probe_lock = threading.Lock()


def make_root(root: Path) -> None:
    """A worker's root (idempotent): its own folders, and the host's links into /usr
    (bwrap's --symlink fails on a link that is there already)."""
    root.mkdir(parents=True, exist_ok=True)
    for name, mode in _PRIVATE.items():
        path = root / name
        if not path.is_dir():
            path.mkdir(parents=True, exist_ok=True)
            path.chmod(mode)
    for name in _SYSTEM_LINKS:
        host = f"/{name}"
        if os.path.islink(host) and not os.path.lexists(root / name):
            os.symlink(os.readlink(host), root / name)


class Refused(Exception):
    """No sandbox, and running unconfined was not asked for."""


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _probe(bwrap: str) -> list[str] | str:
    """The /proc options with which `bwrap` runs a command here, or why it cannot."""
    with _probe_lock:
        if bwrap in _probed:
            return _probed[bwrap]
        result: list[str] | str = f"{bwrap} is not there"
        if os.access(bwrap, os.X_OK):
            with tempfile.TemporaryDirectory(prefix="tpuctl-bwrap-probe-") as root:
                make_root(Path(root))
                for proc in _PROC_CHOICES:
                    argv = [bwrap, "--bind", root, "/", "--ro-bind", "/usr", "/usr", *proc]
                    argv += ["--dev", "/dev", "--", "/bin/sh", "-c", ":"]
                    try:
                        done = subprocess.run(
                            argv, capture_output=True, text=True, timeout=20, check=False
                        )
                    except (OSError, subprocess.SubprocessError) as exc:
                        result = f"{bwrap}: {exc}"
                        break
                    if done.returncode == 0:
                        result = proc
                        break
                    lines = done.stderr.strip().splitlines()
                    result = lines[-1] if lines else f"{bwrap} exited {done.returncode}"
        _probed[bwrap] = result
        return result


def _device_binds(worker_dir: Path) -> list[str]:
    """The worker's TPU device files (files.py), bound read-write at their place under
    /dev: those there now (a `no-device` fault removes them, faults.py)."""
    dev = worker_dir / "dev"
    binds: list[str] = []
    for path in sorted(dev.rglob("*")) if dev.is_dir() else ():
        if path.is_file():
            binds += ["--bind", str(path), f"/dev/{path.relative_to(dev)}"]
    return binds


def _read_only_paths() -> list[str]:
    """What the worker's python3 needs besides /usr: the interpreter's prefixes (a venv,
    pyenv's, ...), the folder tpuctl itself is imported from, and pip's wheel folders
    (guest_env.py)."""
    candidates = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        sys.base_exec_prefix,
        os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))),
        os.path.dirname(os.path.dirname(os.path.realpath(guest_env.python()))),
        str(Path(__file__).resolve().parents[2]),
        *guest_env.find_links_dirs(),
    }
    paths = set()
    for path in candidates:
        path = os.path.realpath(path)
        if os.path.isdir(path) and path not in ("/", "/usr") and not path.startswith("/usr/"):
            paths.add(path)
    # a path inside another one is bound with it
    return sorted(p for p in paths if not any(p.startswith(q + "/") for q in paths))


class Sandbox:
    """How the emulator runs a worker's processes: under bwrap, unconfined, or not at all."""

    def __init__(self, bwrap: str | None = None, unconfined: bool | None = None) -> None:
        self.bwrap = bwrap or os.environ.get(BWRAP_ENV) or shutil.which("bwrap") or "/usr/bin/bwrap"
        if unconfined is None:
            unconfined = _truthy(os.environ.get(UNCONFINED_ENV))
        self.unconfined = unconfined
        self._system: list[str] | None = None
        self._holders: dict[str, Holder] = {}  # worker dir -> its PID namespace's holder
        self._holders_lock = threading.Lock()
        self.docker_cli: str | None = None  # the workers' `docker` (WorkerFiles sets it)

    def problem(self) -> str | None:
        """Why bwrap cannot confine the workers here (None: it can)."""
        found = _probe(self.bwrap)
        return found if isinstance(found, str) else None

    @property
    def confined(self) -> bool:
        return self.problem() is None

    @property
    def mode(self) -> str:
        """`bwrap`, `unconfined` (no sandbox, and asked to run anyway), or `refused`."""
        if self.confined:
            return "bwrap"
        return "unconfined" if self.unconfined else "refused"

    def warning(self) -> str | None:
        """The line `tpuctl emulator start` prints when the workers cannot be confined."""
        problem = self.problem()
        if problem is None:
            return None
        if self.unconfined:
            return (
                f"warning: no sandbox for worker commands ({problem}): they run unconfined, "
                "on this machine's own files"
            )
        return (
            f"warning: no sandbox for worker commands ({problem}): they will be refused; "
            "install bubblewrap (apt-get install bubblewrap) or start with --unconfined"
        )

    def prepare(self, root: Path) -> None:
        """Make a worker's root (idempotent)."""
        make_root(root)

    def _uts(self) -> bool:
        """Can bwrap give a command a hostname of its own here (tried once)?"""
        with _probe_lock:
            if self.bwrap not in _uts_probed:
                try:
                    done = subprocess.run(
                        [self.bwrap, "--bind", "/", "/", "--unshare-uts", "--hostname", "w"]
                        + ["--", "/bin/true"],
                        capture_output=True,
                        timeout=20,
                        check=False,
                    )
                    _uts_probed[self.bwrap] = done.returncode == 0
                except (OSError, subprocess.SubprocessError):
                    _uts_probed[self.bwrap] = False
            return _uts_probed[self.bwrap]

    def _system_binds(self) -> list[str]:
        if self._system is None:
            found = _probe(self.bwrap)
            proc = found if isinstance(found, list) else list(_PROC_CHOICES[0])
            binds = ["--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
            for name in _SYSTEM_LINKS:
                host = f"/{name}"
                if os.path.isdir(host) and not os.path.islink(host):
                    binds += ["--ro-bind", host, host]
            for path in _read_only_paths():
                binds += ["--ro-bind", path, path]
            self._system = [*binds, *proc, "--dev", "/dev"]
        return self._system

    def _holder(self, root: str) -> Callable[[int], list[str]]:
        """The holder of a PID namespace whose init sees `root` as `/`, immune to all but
        SIGKILL (a preemption's notice SIGTERMs the worker's processes; the namespace must
        outlive it, or the job would get no notice at all)."""
        return lambda info: [
            "/bin/sh",
            "-c",
            'trap "" HUP INT QUIT TERM USR1 USR2; exec "$@"',
            "sh",
            self.bwrap,
            "--bind",
            root,
            "/",
            *self._system_binds(),
            "--unshare-pid",
            *_NO_CAPS,
            "--info-fd",
            str(info),
            "--",
            "sleep",
            "infinity",
        ]

    @property
    def namespaced(self) -> bool:
        """Does every worker get a PID namespace of its own here (tried once per bwrap)?"""
        if not self.confined or os.geteuid() != 0:
            return False
        with _pidns_lock:
            if self.bwrap not in _pidns_probed:
                _pidns_probed[self.bwrap] = self._try_namespace()
            return _pidns_probed[self.bwrap]

    def _try_namespace(self) -> bool:
        with tempfile.TemporaryDirectory(prefix="tpuctl-bwrap-probe-") as root:
            make_root(Path(root))
            try:
                holder = Holder(self._holder(root), dict(os.environ))
            except OSError:
                return False
            try:
                with Command([], (holder.namespace(),)) as join:
                    argv = [self.bwrap, "--bind", root, "/", *self._system_binds()]
                    argv += ["--pidns", str(join.fds[0]), "--", "/bin/sh", "-c", ":"]
                    done = subprocess.run(
                        argv, pass_fds=join.fds, capture_output=True, timeout=20, check=False
                    )
                return done.returncode == 0
            except (OSError, subprocess.SubprocessError):
                return False
            finally:
                holder.stop()

    def _namespace(self, worker_dir: str, env: dict[str, str]) -> int:
        """A descriptor of the worker's PID namespace, whose holder is started (with the
        worker's environment, so it goes with the worker's processes) when none runs."""
        with self._holders_lock:
            holder = self._holders.get(worker_dir)
            if holder is not None and holder.alive():
                with contextlib.suppress(OSError):
                    return holder.namespace()
            if holder is not None:
                holder.stop()
            holder = Holder(self._holder(f"{worker_dir}/root"), {**env, HOLDER_ENV: "1"})
            self._holders[worker_dir] = holder
            return holder.namespace()

    def host_pid(self, outer: int, inner: int) -> int | None:
        """The machine's pid of the process a worker's launcher reported as `inner` (its
        namespace's), started by bwrap `outer`; None when it has ended."""
        if not self.namespaced:
            return inner
        frontier = [outer]
        for _ in range(3):  # bwrap -> launcher -> command
            frontier = [child for pid in frontier for child in children(pid)]
            for pid in frontier:
                if ns_pid(pid) == inner:
                    return pid
        return None

    def end_namespaces(self, which: Callable[[str], bool]) -> None:
        """End the PID namespaces of the workers whose folders `which` accepts (and with
        them what still runs there), waiting for their holders."""
        with self._holders_lock:
            ending = {k: h for k, h in self._holders.items() if which(k)}
            for key in ending:
                del self._holders[key]
        for holder in ending.values():
            holder.stop()

    def close(self) -> None:
        """End every worker's PID namespace."""
        self.end_namespaces(lambda _: True)

    def command(
        self,
        worker_dir: Path,
        cwd: str,
        argv: list[str],
        hostname: str | None = None,
        env: dict[str, str] | None = None,
    ) -> Command:
        """`argv` as it runs on the worker whose folder is `worker_dir`, starting in `cwd`,
        named `hostname` (a UTS namespace of its own, where bwrap can make one), in the
        worker's PID namespace (`env`: the worker's environment, for its holder); raises
        Refused when there is no sandbox and unconfined was not asked for. Start it
        within `with`, giving it the command's `fds`."""
        if not self.confined:
            if self.unconfined:
                return Command(argv)
            raise Refused(REFUSAL)
        wdir = str(worker_dir)
        named = ["--unshare-uts", "--hostname", hostname] if hostname and self._uts() else []
        fds: tuple[int, ...] = ()
        joined: list[str] = []
        if self.namespaced:
            fds = (self._namespace(wdir, env if env is not None else dict(os.environ)),)
            joined = ["--pidns", str(fds[0]), *_NO_CAPS]
        elif os.geteuid() == 0:
            joined = list(_NO_CAPS)
        return Command(
            [
                self.bwrap,
                *named,
                *joined,
                "--bind",
                f"{wdir}/root",
                "/",
                *self._system_binds(),
                *_device_binds(worker_dir),
                *self._docker_binds(),
                "--bind",
                wdir,
                wdir,
                "--chdir",
                cwd,
                "--",
                *argv,
            ],
            fds,
        )

    def _docker_binds(self) -> list[str]:
        if self.docker_cli is None:
            return []
        where = [p for p in _DOCKER_PATHS if os.path.isfile(p)] or ["/snap/bin/docker"]
        return [arg for path in where for arg in ("--ro-bind", self.docker_cli, path)]

    def container(
        self,
        worker_dir: Path,
        root: str,
        argv: list[str],
        binds: list[str],
        cwd: str,
        hostname: str | None,
    ) -> Command:
        """A container's process (containers.py), started from outside the worker's
        sandbox: `root` as `/`, a procfs, a minimal /dev with the worker's TPU device files,
        `binds`, the worker's hostname, without any capability, in the worker's PID
        namespace (OSError when the worker has none running: it is down)."""
        if not self.confined:
            raise Refused("containers run only in the workers' sandbox (bubblewrap)")
        found = _probe(self.bwrap)
        proc = found if isinstance(found, list) else list(_PROC_CHOICES[0])
        named = ["--unshare-uts", "--hostname", hostname] if hostname and self._uts() else []
        fds: tuple[int, ...] = ()
        if self.namespaced:
            with self._holders_lock:
                holder = self._holders.get(str(worker_dir))
                if holder is None or not holder.alive():
                    raise OSError("the worker is not running")
                fds = (holder.namespace(),)
            named += ["--pidns", str(fds[0])]
        else:  # a namespace of its own, which ends with it
            named += ["--unshare-pid", "--die-with-parent"]
        if os.geteuid() == 0:
            named += _NO_CAPS
        return Command(
            [self.bwrap, *named, "--bind", root, "/", *proc, "--dev", "/dev"]
            + [*_device_binds(worker_dir), *binds, "--chdir", cwd, "--", *argv],
            fds,
        )

    def read_only(self) -> list[str]:
        """Where the workers see the machine's files (read-only), not their own."""
        binds = self._system_binds()
        return [binds[i + 2] for i, arg in enumerate(binds) if arg == "--ro-bind"]
