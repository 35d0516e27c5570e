"""The agent bundle: the modules that run on a TPU VM worker, as ONE zipapp built in
memory, and the shell commands that install and run it there.

Invariants:
- The bundle holds the package `tpuctl_agent` (this folder's modules, minus this one)
  and a `__main__.py` that runs `tpuctl_agent.__main__`; it needs only Python 3.8+ and
  its standard library (a test runs it with `python -I`).
- It is built deterministically (fixed timestamps and modes), so the same sources give
  the same bytes, and it is named by its content on the VM:
  `~/.tpuctl/tpuctl-agent-<sha256[:12]>.pyz`. Installing again is idempotent, and a new
  tpuctl never replaces the file an older agent still runs from.
- An install writes a temporary file, checks its sha256, then renames it into place:
  no reader ever sees a partial bundle.

Runs on the laptop only (it is not in the bundle); standard library only.
"""

from __future__ import annotations

import functools
import hashlib
import io
import shlex
import zipfile
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
    "job.py",
    "teardown.py",
    "agent.py",
    "idle.py",
    "follow.py",
    "hang.py",
    "chips.py",
    "stacks.py",
    "sitehook.py",
    "profile.py",
    "guard.py",
    "checkup.py",
    "claims.py",
    "compute_api.py",
    "target.py",
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
# What `python3 BUNDLE` runs: `PACKAGE.__main__:main`, as the standard library's zipapp
# writes it, from the package extracted once beside the bundle (BUNDLE minus .pyz, plus
# .d): Python caches the compiled modules there, where from the zip every process compiled
# them from source again (15% of the agents' CPU in the suite, by py-spy). A bundle not
# under its own name (the install's check of a temporary file), or a folder it cannot
# write, runs from the zip. The folder is named by the bundle's content as the bundle is,
# made whole or not at all (a rename), and is as much the user's as the bundle file.
MAIN = (
    """\
import os
import sys


def _extracted():
    pyz = os.path.abspath(sys.path[0])
    name = os.path.basename(pyz)
    if not (name.startswith("PREFIX") and name.endswith("SUFFIX")):
        return None
    folder = pyz[: -len("SUFFIX")] + ".d"
    if not os.path.isdir(os.path.join(folder, "PACKAGE")):
        import shutil
        import tempfile
        import zipfile

        try:
            tmp = tempfile.mkdtemp(prefix=".extract-", dir=os.path.dirname(pyz))
        except OSError:
            return None
        try:
            with zipfile.ZipFile(pyz) as zf:
                zf.extractall(tmp, [n for n in zf.namelist() if n.startswith("PACKAGE/")])
            os.rename(tmp, folder)
        except OSError:  # another process extracted it first, or no room
            shutil.rmtree(tmp, ignore_errors=True)
    return folder if os.path.isdir(os.path.join(folder, "PACKAGE")) else None


_folder = _extracted()
if _folder:
    sys.path.insert(0, _folder)
from PACKAGE.__main__ import main

sys.exit(main())
""".replace("PREFIX", BUNDLE_PREFIX)
    .replace("SUFFIX", BUNDLE_SUFFIX)
    .replace("PACKAGE", PACKAGE)
)
_HERE = Path(__file__).resolve().parent
_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip can hold


@functools.lru_cache(maxsize=1)
def build() -> bytes:
    """The zipapp's bytes (the sources do not change while tpuctl runs: built once)."""
    files = [("__main__.py", MAIN.encode())]
    files += [(f"{PACKAGE}/{name}", (_HERE / name).read_bytes()) for name in MODULES]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in files:
            info = zipfile.ZipInfo(name, date_time=_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
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


def install_command(root: str = REMOTE_ROOT) -> str:
    """A shell command that installs the bundle read from its stdin at `remote_path`."""
    path = remote_path(root)
    tmp = f"{root}/.{file_name()}.$$"  # one per shell: concurrent installs never meet
    return (
        f"mkdir -p {root} && cat > {tmp} && python3 {tmp} verify {sha256()} "
        f"&& mv -f {tmp} {path} || {{ rm -f {tmp}; exit 1; }}"
    )


def command(*args: str, root: str = REMOTE_ROOT) -> str:
    """`python3 BUNDLE ARGS...` for the remote shell: the arguments are quoted, the path
    is not (its `~` must expand)."""
    return f"python3 {remote_path(root)} " + shlex.join(args)
