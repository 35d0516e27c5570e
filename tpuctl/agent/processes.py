"""The processes of a worker: whether a pid exists, and how an agent's process is known
(the bundle's file name in its command line).

Standard library only, Python 3.8+, like every module of the agent (bundle.py).
"""

from __future__ import annotations

import os

# The bundle's file name on a VM is BUNDLE_PREFIX + <sha256[:12]> + BUNDLE_SUFFIX
# (bundle.py); idle.py knows an agent's process by it.
BUNDLE_PREFIX, BUNDLE_SUFFIX = "tpuctl-agent-", ".pyz"


def alive(pid: int) -> bool:
    """Does process `pid` exist (also when it belongs to another user)?"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
