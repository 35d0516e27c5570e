"""The agent bundle: the modules that run on a TPU VM worker, as ONE zipapp built in
memory, and the shell commands that install and run it there.

Invariants:
- The bundle holds the package `tpuctl_agent` (this folder's modules, minus this one)
  and a `__main__.py` (MAIN) that runs `tpuctl_agent.__main__`; it needs only Python
  3.8+ and its standard library (a test runs it with `python -I`).
- It is built deterministically (fixed timestamps and modes), so the same sources give
  the same bytes, and it is named by its content on the VM:
  `~/.tpuctl/tpuctl-agent-<sha256[:12]>.pyz`. Every install sends it again, checks what
  it wrote, and renames it into place: no reader ever sees a partial bundle, and one
  changed on the VM is replaced.
- It runs only as the client sent it, checked at the moment it is used: every command
  (`command`) is `python3 -I -S -c BOOTSTRAP SHA256 PATH ARGS...`, where BOOTSTRAP,
  on the command line and so the client's, reads the file once, compares its sha256
  with the one the client sent, and runs the package from those bytes in memory. A job
  runs as the agent's Unix user and can rewrite anything under `~`: a bundle it changed
  is refused with one line (exit status REFUSED), and nothing of the agent is ever read
  from a file again (no extracted folder, no cached .pyc), so the modules a process
  imports later, also after forking, are the checked ones.

Runs on the laptop only (it is not in the bundle); standard library only.
"""

from __future__ import annotations

import functools
import hashlib
import io
import shlex
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path

from .processes import BUNDLE_PREFIX, BUNDLE_SUFFIX

PACKAGE = "tpuctl_agent"
MODULES = (
    "__init__.py",
    "__main__.py",
    "net.py",
    "metadata.py",
    "storage.py",
    "tpu_api.py",
    "processes.py",
    "protocol.py",
    "labels.py",
    "downloads.py",
    "streams.py",
    "transfer.py",
    "retention.py",
    "preflight.py",
    "tpu_preflight.py",
    "tpu_checks.py",
    "job.py",
    "teardown.py",
    "agent.py",
    "idle.py",
    "follow.py",
    "hang.py",
    "maintenance.py",
    "tpu_health.py",
    "container.py",
    "launch.py",
    "chips.py",
    "stacks.py",
    "sitehook.py",
    "profile.py",
    "guard.py",
    "checkup.py",
    "claims.py",
    "compute_api.py",
    "target.py",
    "targets/__init__.py",
    "targets/tpu.py",
    "targets/compute.py",
    "monitoring.py",
    "envkeys.py",
    "envbuild.py",
    "envs.py",
    "wheels.py",
    "signing.py",
    "outputs.py",
    "manifests.py",
)
REMOTE_ROOT = "~/.tpuctl"  # a shell word: `~` is left to the remote shell to expand
# The exit status of a command refused because the bundle is not the one the client
# sent (EX_DATAERR of sysexits.h); its one line on stderr says why.
REFUSED = 65
# The client's program on the command line, run by `python3 -I -S -c` (no environment
# variable, user site, site-packages or current folder reaches it) with the arguments
# SHA256 PATH ARGS...: read PATH once, check its sha256, then run the bundle's first
# entry, MAIN (stored, uncompressed: its local header gives its size and where it
# starts), with those bytes (as BUNDLE) and `sys.argv` = [PATH, ARGS...].
BOOTSTRAP = """\
import hashlib, sys
digest, path = sys.argv[1:3]
try:
    with open(path, "rb") as f:
        data = f.read()
    found = hashlib.sha256(data).hexdigest()
    why = "its sha256 is %s..., not %s..." % (found[:12], digest[:12])
except OSError as e:
    data, found, why = b"", "", "it cannot be read (%s)" % e.strerror
if found != digest:
    sys.stderr.write("tpuctl-agent: refused: the agent bundle %s is not the one this client "
                     "sent: %s; it was changed on the VM (by a job?), so none of it runs\\n"
                     % (path, why))
    sys.exit(REFUSED)
at = 30 + int.from_bytes(data[26:28], "little") + int.from_bytes(data[28:30], "little")
main = data[at : at + int.from_bytes(data[18:22], "little")]
sys.argv[:] = sys.argv[2:]
exec(compile(main, path + "/__main__.py", "exec"), {"__name__": "__main__", "BUNDLE": data})
""".replace("REFUSED", str(REFUSED))
# The bundle's __main__.py, run by BOOTSTRAP with the bytes it checked: it imports the
# package from those bytes alone (a finder first on sys.meta_path, compiling each
# module from its source in BUNDLE, in memory), then runs `PACKAGE.__main__:main`.
# Run otherwise (`python3 BUNDLE`) it refuses: nothing checked it.
MAIN = """\
import sys


class VerifiedBundle(object):
    \"\"\"Finds and loads the modules of PACKAGE from the bundle's checked bytes only: never
    from a file, a folder or a compiled .pyc that a job could have written.\"\"\"

    def __init__(self, path, data):
        import struct

        self.path, self.data, self.files = path, data, {}
        end = data.rindex(b"PK\\x05\\x06")  # the end of the central directory
        count, at = struct.unpack_from("<10xH4xL", data, end)
        for _ in range(count):
            method, size, n, e, c, local = struct.unpack_from("<10xH8xL4xHHH8xL", data, at)
            name = data[at + 46 : at + 46 + n].decode()
            ln, le = struct.unpack_from("<HH", data, local + 26)
            self.files[name] = (method, local + 30 + ln + le, size)
            at += 46 + n + e + c

    def _file(self, name):
        base = name.replace(".", "/")
        for file, package in ((base + "/__init__.py", True), (base + ".py", False)):
            if file in self.files:
                return file, package
        return None, False

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] != "PACKAGE":
            return None
        file, package = self._file(name)
        if file is None:
            return None
        from importlib.machinery import ModuleSpec

        return ModuleSpec(name, self, origin=self.path + "/" + file, is_package=package)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        source = self.get_source(module.__name__)
        exec(compile(source, module.__spec__.origin, "exec", dont_inherit=True), module.__dict__)

    def get_source(self, name):  # also what tracebacks show (linecache asks for it)
        method, start, size = self.files[self._file(name)[0]]
        data = self.data[start : start + size]
        if method:
            import zlib

            data = zlib.decompress(data, -15)
        return data.decode("utf-8")


if "BUNDLE" not in globals():
    sys.stderr.write("tpuctl-agent: refused: this bundle runs only through tpuctl's check of it\\n")
    sys.exit(REFUSED)
sys.meta_path.insert(0, VerifiedBundle(sys.argv[0], BUNDLE))
from PACKAGE.__main__ import main

sys.exit(main())
""".replace("PACKAGE", PACKAGE).replace("REFUSED", str(REFUSED))
_HERE = Path(__file__).resolve().parent
_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip can hold


# The agent targets of further APIs that the bundle carries, as `targets/KEY.py` (KEY ->
# the path of its module: `BackendKind.agent_module`), asked at each build: the client's
# registry sets it (cloud/registry.py), so that the bundle, like the agent, names no API.
carried: Callable[[], Mapping[str, str]] = dict


def build() -> bytes:
    """The zipapp's bytes, with the targets `carried` names."""
    return _build(tuple(sorted(carried().items())))


@functools.lru_cache(maxsize=4)
def _build(targets: tuple[tuple[str, str], ...]) -> bytes:
    """The zipapp's bytes (the sources do not change while tpuctl runs: built once per set
    of carried targets). MAIN comes first and stored, as BOOTSTRAP reads it."""
    files = [("__main__.py", MAIN.encode())]
    files += [(f"{PACKAGE}/{name}", (_HERE / name).read_bytes()) for name in MODULES]
    for key, path in targets:
        name = f"{PACKAGE}/targets/{key}.py"
        if not key.isidentifier() or any(f == name for f, _ in files):
            raise ValueError(f"agent target {key!r} ({path}) is not a new module name")
        files.append((name, Path(path).read_bytes()))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in files:
            info = zipfile.ZipInfo(name, date_time=_EPOCH)
            stored = name == "__main__.py"
            info.compress_type = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, data)
    return buffer.getvalue()


def sha256() -> str:
    return hashlib.sha256(build()).hexdigest()


def file_name() -> str:
    return f"{BUNDLE_PREFIX}{sha256()[:12]}{BUNDLE_SUFFIX}"


def remote_path(root: str = REMOTE_ROOT) -> str:
    """Where the bundle lives on a worker; `root` is a shell word, used as it is."""
    return f"{root}/{file_name()}"


def run(path: str, *args: str) -> str:
    """The shell command that runs the bundle at `path` (a shell word, used as it is)
    with ARGS, checked: `python3 -I -S -c BOOTSTRAP SHA256 PATH ARGS...`."""
    return " ".join(
        ["python3 -I -S -c", shlex.quote(BOOTSTRAP), sha256(), path, *map(shlex.quote, args)]
    )


def install_command(root: str = REMOTE_ROOT) -> str:
    """A shell command that installs the bundle read from its stdin at `remote_path`:
    always, whatever is there (a file a job changed is replaced), checked before the
    rename."""
    path = remote_path(root)
    tmp = f"{root}/.{file_name()}.$$"  # one per shell: concurrent installs never meet
    return (
        f"mkdir -p {root} && cat > {tmp} && {run(tmp, 'verify')} "
        f"&& mv -f {tmp} {path} || {{ rm -f {tmp}; exit 1; }}"
    )


def command(*args: str, root: str = REMOTE_ROOT) -> str:
    """The bundle's program ARGS on a worker, checked (`run`): the arguments are quoted,
    the path is not (its `~` must expand)."""
    return run(remote_path(root), *args)
