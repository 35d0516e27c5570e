"""The processes of a worker: whether a pid exists, and how an agent's process is known
(the bundle's file name in its command line).

Standard library only, Python 3.8+, like every module of the agent (bundle.py).
"""

from __future__ import annotations

import os

# The bundle's file name on a VM is BUNDLE_PREFIX + <sha256[:12]> + BUNDLE_SUFFIX
# (bundle.py); idle.py knows an agent's process by it.
BUNDLE_PREFIX, BUNDLE_SUFFIX = "tpuctl-agent-", ".pyz"


def in_group(group: int) -> dict[int, list[bytes]]:
    """The processes of process group `group`: their /proc/PID/stat fields after the
    command's name (so [0] is the state, [2] the group, [11] and [12] utime and stime)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 12 and int(fields[2]) == group:
            found[int(entry)] = fields
    return found


def alive(pid: int) -> bool:
    """Does process `pid` exist (also when it belongs to another user)?"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
