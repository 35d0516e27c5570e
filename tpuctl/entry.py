"""The `tpuctl` program's first code: a Ctrl-C at any moment ends it with one line and
exit status 130, never a traceback or death by the signal.

It imports nothing heavy, so that a signal during the imports of the CLI (the first
tenth of a second or so) is caught too; and once tpuctl is ending, further SIGINT,
SIGTERM and SIGHUP are ignored (a second Ctrl-C while it says what it left behind
must not cut that short). `tpuctl.interrupts` sets every signal's handler.
"""

from __future__ import annotations

import gc
import os
import sys

EXIT_INTERRUPTED = 130
# The cyclic garbage collector runs every 700 allocations by default; a command imports
# Google's clients (hundreds of thousands of objects that live until it ends), and the
# collections during those imports were 13-16% of their CPU time (bench/startup.py,
# docs/performance.md). Collections every 10,000 allocations keep what they find.
GC_THRESHOLDS = (10_000, 20, 20)
# gRPC's fork handlers (Cloud Monitoring's client) run in every child forked while its
# threads are busy, ssh and the emulator's workers included, and can kill the child
# before its exec ("epoll_wait error: Bad file descriptor"): tpuctl forks only to exec.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")


def main() -> None:
    gc.set_threshold(*GC_THRESHOLDS)
    code, done = EXIT_INTERRUPTED, False
    try:
        # SIGTERM and SIGHUP end it as a Ctrl-C does, from the imports to the end
        from tpuctl.interrupts import like_ctrl_c, quiet

        like_ctrl_c()
        from tpuctl import quick_help

        top_help = quick_help.wanted(sys.argv[1:])
        text = quick_help.cached() if top_help else None
        if text is not None:  # the top-level help, as the last one printed it
            sys.stdout.write(text)
            code = 0
        elif top_help:
            from tpuctl.cli import main as cli_main

            code = quick_help.record(cli_main)
        else:
            from tpuctl.cli import main as cli_main

            code = cli_main()
        done = True  # it said what happened, "error: interrupted" included
        # A signal that came in the command's last moments is raised by Python at its
        # next call: here, inside the `try` (seen in `make chaos`: a second Ctrl-C right
        # after the first's message killed the process when it was raised below).
        quiet()
    except KeyboardInterrupt:
        pass
    while True:  # ignore further signals, even one that arrives while they are set so
        try:
            from tpuctl.interrupts import quiet  # (again: a signal may have cut its import)

            quiet()
            break
        except KeyboardInterrupt:
            continue
    if not done:
        sys.stderr.write("error: interrupted\n")
    if code == EXIT_INTERRUPTED:
        _forget_the_interrupt()
    sys.exit(code)


def _forget_the_interrupt() -> None:
    """CPython remembers a KeyboardInterrupt that left code run through PyRun_String (as
    a C extension may during its import) in a flag that catching it does not clear, and
    at exit kills the process with SIGINT instead of exiting with the status given
    (seen: `exit -2` after "error: interrupted", for a Ctrl-C during the imports). Every
    PyRun_String clears the flag first: one that runs nothing does only that."""
    try:
        import ctypes

        ctypes.pythonapi.PyRun_SimpleString(b"")
    except (ImportError, AttributeError, OSError):  # no ctypes here: nothing to do
        pass


if __name__ == "__main__":
    main()
