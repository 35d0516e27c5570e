"""The live log follower: print a job's log from a byte offset and keep following it
until the agent process has exited and everything is printed.

Standard library only, Python 3.8+. The runner starts it over SSH for each worker
(`python3 BUNDLE follow PATH OFFSET PID`) and, when the connection drops, starts it
again from the offset it has received so far: its output is exactly the log's bytes
from OFFSET on, nothing else, so the client's count of bytes is the next offset.
"""

from __future__ import annotations

import os
import sys
import time
from typing import BinaryIO

from .processes import alive

POLL = 0.2  # seconds between looks at a quiet log


def follow(path: str, offset: int, pid: int, out: BinaryIO) -> int:
    while not os.path.exists(path):
        if not alive(pid):
            return 0
        time.sleep(POLL)
    with open(path, "rb") as f:
        f.seek(offset)
        while True:
            chunk = f.read(65536)
            if chunk:
                out.write(chunk)
                out.flush()
                continue
            if not alive(pid):
                # the agent may have written more between the last read and its exit
                out.write(f.read())
                out.flush()
                return 0
            time.sleep(POLL)


def main(argv: list[str] | None = None) -> int:
    path, offset, pid = sys.argv[1:] if argv is None else argv
    return follow(path, int(offset), int(pid), sys.stdout.buffer)
