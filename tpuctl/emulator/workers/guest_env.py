"""What a worker's processes start with: a VM's environment, not the laptop's shell's.

A TPU VM's processes start with a PATH of system folders and a locale; the emulator adds
its own overrides (`WorkerFiles.env`: the endpoints, the worker's HOME, devices...). Of
the shell that started the emulator, a worker keeps only what stands for the image's and
the network's settings, since the emulated VM is made on this machine and shares its
network: pip's settings (`PIP_*`: a VM's pip honours its image's), the settings of tpuctl's
agent an image may carry (`TPUCTL_ENV_KEEP_DAYS`, `TPUCTL_ENV_LOCK_STALE`,
`TPUCTL_IDLE_INTERVAL`), the proxies, the CA bundle, the locale and the time zone.
Nothing else of that shell (cloud credentials, tokens, a virtualenv, PYTHONPATH...)
reaches a job. Of `PIP_FIND_LINKS`, the folders that do not exist are left out (pip would
say "Location ... is ignored" on every run); those that exist the sandbox shows the
workers read-only (sandbox.py), as an image made on this machine would carry them.

The workers' `python3` is a system Python, as a TPU VM image's is: the interpreter the
emulator's virtualenv was made from (its base), which sees nothing of that virtualenv's
site-packages (tpuctl's own jax, say); `TPUCTL_EMULATOR_WORKER_PYTHON` names another (a
venv's python, to give the workers its packages). A job's environment is a venv the agent
makes per job from that python (agent/envs.py).
"""

from __future__ import annotations

import os
import re
import sys

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/snap/bin"
_KEPT = frozenset(
    {
        "LANG",
        "TZ",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        # settings of tpuctl's agent that an image may carry (agent/envs.py, idle.py)
        "TPUCTL_ENV_KEEP_DAYS",
        "TPUCTL_ENV_LOCK_STALE",
        "TPUCTL_IDLE_INTERVAL",
        *(p + s for p in ("http", "https", "no", "all") for s in ("_proxy", "_PROXY")),
    }
)
_KEPT_PREFIXES = ("PIP_", "LC_")


PYTHON_ENV = "TPUCTL_EMULATOR_WORKER_PYTHON"


def base() -> dict[str, str]:
    """The environment a worker's process starts from, before the emulator's overrides."""
    env = {"LANG": "C.UTF-8", "PATH": SYSTEM_PATH}
    env.update({k: v for k, v in os.environ.items() if k in _KEPT or k.startswith(_KEPT_PREFIXES)})
    if "PIP_FIND_LINKS" in env:
        links = [x for x in env.pop("PIP_FIND_LINKS").split() if _is_url(x) or os.path.isdir(x)]
        if links:
            env["PIP_FIND_LINKS"] = " ".join(links)
    return env


def find_links_dirs() -> list[str]:
    """The folders of the emulator's PIP_FIND_LINKS that exist (the workers see them)."""
    found = os.environ.get("PIP_FIND_LINKS", "").split()
    return [os.path.realpath(x) for x in found if not _is_url(x) and os.path.isdir(x)]


def _is_url(location: str) -> bool:
    return re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", location) is not None


def python() -> str:
    """The workers' python3 (see above)."""
    named = os.environ.get(PYTHON_ENV)
    if named:
        return named
    return str(getattr(sys, "_base_executable", "") or sys.executable)
