"""A job's Python environment as the laptop and the agent both see it: the requirement
set read from a file (`requirement_lines`), the environment key (`env_key`) and where an
environment lives in the bucket (docs/environments.md). Both sides import this module;
it does no I/O.

The key is the sha256 of the canonical JSON (protocol.canonical) of

    {"recipe": 1, "requirements": [the normalized lines, sorted],
     "python": "3.10.12", "implementation": "cpython", "abi": SOABI,
     "platform": sysconfig.get_platform(), "libc": "glibc 2.35",
     "runtime": the node's runtime version, "system_site_packages": bool,
     "indexes": the keyed digest of the job's index settings (INDEX_SETTINGS),
     "signer": the public name of the client's key (signing.py)}

taken on the VM (`vm_facts`, and `indexes` from the client: signing.Trust): two VMs with
the same image and runtime share their environments, a different Python, platform or
package index never does, nor do two clients (each trusts only the indexes it vouched
for). The index of an entry records its requirement lines and facts, so that the client
can check that a job's index sits under the key of that job's own requirement set. A lock
file (every line pinned `==`, with or without `--hash`) is the resolved set itself; for a
file with ranges the key is of the lines as written, and the index records what they
resolved to (so a new release upstream reaches the job with --rebuild-env, not behind
its back).

Standard library only, Python 3.8+: it travels in the agent bundle (bundle.py).
"""

from __future__ import annotations

import hashlib
import platform
import re
import sys
import sysconfig
from typing import Any, Dict

Json = Dict[str, Any]

RECIPE = 1
ENVS = "tpuctl/envs/"
#   tpuctl/envs/<key>/wheels/<sha256>/<file>.whl   the wheels, content-addressed
#   tpuctl/envs/<key>/lock.json                    who builds it now (generation 0 wins)
#   tpuctl/envs/<key>/built/<job>.json             a job's build: its index, signed with its key
#   tpuctl/envs/<key>/index.json                   written LAST: the newest build's index
#   tpuctl/envs/<key>/used.json                    rewritten by worker 0 of each job using it
INDEX_VERSION = 2
# The job's settings that change where pip looks (from its --env values): their digest,
# keyed with the client's key on the laptop, is part of the key (`indexes`), so that a
# build from another index is never reused, and no URL (nor a token in it) is stored.
INDEX_SETTINGS = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX")
# Lines a requirement set may not hold: what reads other files or the laptop's disk.
_REFUSED = re.compile(r"^(-r|--requirement|-c|--constraint|-e|--editable)(\s|=|$)")
_CREDENTIALS = re.compile(r"://[^/\s@]+@")


class BadRequirements(ValueError):
    """A requirement set tpuctl will not ship (said with the line)."""


def requirement_lines(text: str) -> list[str]:
    """The requirement set of a requirements file: one entry per requirement or option,
    comments and blank lines dropped, continuation lines joined, whitespace collapsed;
    sorted and without duplicates (their order does not change what pip resolves)."""
    joined, lines = "", []
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if line.endswith("\\"):
            joined += line[:-1] + " "
            continue
        line, joined = (joined + line).strip(), ""
        if not line:
            continue
        line = " ".join(line.split())
        if _REFUSED.match(line):
            raise BadRequirements(
                f"{line!r}: -r, -c and -e are not supported (list the requirements in one file)"
            )
        if _CREDENTIALS.search(line):
            raise BadRequirements(
                f"{line.split()[0]} ...: an index URL with credentials would be stored in "
                "the bucket; pass it as --env PIP_INDEX_URL=... (or PIP_EXTRA_INDEX_URL)"
            )
        lines.append(line)
    return sorted(set(lines))


def pinned(lines: list[str]) -> bool:
    """Is this set a lock file (every requirement pinned with `==`)?"""
    reqs = [ln for ln in lines if not ln.startswith("-")]
    return bool(reqs) and all("==" in ln for ln in reqs)


def vm_facts(runtime: str, system_site_packages: bool) -> Json:
    """What of this machine an environment depends on (the module docstring)."""
    libc = " ".join(x for x in platform.libc_ver() if x)
    return {
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "abi": str(sysconfig.get_config_var("SOABI") or ""),
        "platform": sysconfig.get_platform(),
        "libc": libc,
        "runtime": runtime,
        "system_site_packages": bool(system_site_packages),
    }


def env_key(lines: list[str], facts: Json, signer: str = "") -> str:
    from .protocol import canonical

    value = dict(facts, recipe=RECIPE, requirements=sorted(lines), signer=signer)
    return hashlib.sha256(canonical(value)).hexdigest()


def env_prefix(key: str) -> str:
    return f"{ENVS}{key}/"


def index_path(key: str) -> str:
    return env_prefix(key) + "index.json"


def built_path(key: str, job: str) -> str:
    return env_prefix(key) + f"built/{job}.json"


def used_path(key: str) -> str:
    return env_prefix(key) + "used.json"


def lock_path(key: str) -> str:
    return env_prefix(key) + "lock.json"


def wheel_path(key: str, sha256: str, filename: str) -> str:
    return f"{env_prefix(key)}wheels/{sha256}/{filename}"


def valid_index(value: Any, key: str) -> bool:
    """Is this an index object of environment `key`, with a sha256 for each wheel?"""
    if not isinstance(value, dict) or value.get("version") != INDEX_VERSION:
        return False
    if value.get("key") != key or not isinstance(value.get("wheels"), list):
        return False
    for wheel in value["wheels"]:
        if not isinstance(wheel, dict) or not re.match(r"^[0-9a-f]{64}$", str(wheel.get("sha256"))):
            return False
        name = str(wheel.get("file", ""))
        if not name.endswith(".whl") or "/" in name or name.startswith("."):
            return False
    return True
