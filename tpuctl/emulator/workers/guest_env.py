"""What a worker's processes start with: a VM's environment, not the laptop's shell's.

A TPU VM's processes start with a PATH of system folders and a locale; the emulator adds
its own overrides (`WorkerFiles.env`: the endpoints, the worker's HOME, devices...). Of
the shell that started the emulator, a worker keeps only what stands for the image's and
the network's settings, since the emulated VM is made on this machine and shares its
network: pip's settings (`PIP_*`: a VM's pip honours its image's), the settings of tpuctl's
agent an image may carry (`TPUCTL_ENV_KEEP_DAYS`, `TPUCTL_ENV_LOCK_STALE`,
`TPUCTL_IDLE_INTERVAL`), the proxies, the CA bundle, the locale and the time zone.
Nothing else of that shell (cloud credentials, tokens, a virtualenv, PYTHONPATH...)
reaches a job.
"""

from __future__ import annotations

import os

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


def base() -> dict[str, str]:
    """The environment a worker's process starts from, before the emulator's overrides."""
    env = {"LANG": "C.UTF-8", "PATH": SYSTEM_PATH}
    env.update({k: v for k, v in os.environ.items() if k in _KEPT or k.startswith(_KEPT_PREFIXES)})
    return env
