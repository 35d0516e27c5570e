"""The agent bundle's entry point: `python3 BUNDLE PROGRAM ARGS...` on a TPU VM worker
(run through the bundle's check, bundle.BOOTSTRAP: `python3 -I -S -c BOOTSTRAP SHA256
BUNDLE PROGRAM ARGS...`).

    agent start|run ...        the job (agent.py)
    idle check|watch ...       the idleness check and the idle watchdog (idle.py)
    follow PATH OFFSET PID     the live log follower (follow.py)
    guard [--poll S]           the boot guard of a node made for a job (guard.py)
    checkup [--gs URL]...      tpuctl doctor NODE's look at the worker (checkup.py)
    stacks --job-id J ...      the job's Python stacks on this worker (stacks.py)
    profile --job-id J ...     a profile of the job's JAX or TensorFlow processes (profile.py)
    verify                     exit 0: the check found the bundle's file to be the one
                               sent (the install checks an upload so before renaming it
                               into place)

Standard library only, Python 3.8+. `python -m tpuctl.agent ...` runs the same on the
laptop; inside the bundle this module is tpuctl_agent.__main__ (bundle.py).
"""

from __future__ import annotations

import importlib
import sys

# Each program's module, imported only when it is the one run: a `follow` or `verify`
# does not pay for importing the agent's other programs (a quarter second of CPU each).
PROGRAMS = {
    "agent": "agent",
    "idle": "idle",
    "follow": "follow",
    "guard": "guard",
    "checkup": "checkup",
    "stacks": "stacks",
    "profile": "profile",
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["verify"]:  # run only once bundle.BOOTSTRAP found the file the one sent
        return 0
    if not args or args[0] not in PROGRAMS:
        print(
            "usage: python3 BUNDLE agent|idle|follow|guard|checkup|stacks|profile|verify ARGS...",
            file=sys.stderr,
        )
        return 2
    module = importlib.import_module(f".{PROGRAMS[args[0]]}", __package__)
    return int(module.main(args[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main())
