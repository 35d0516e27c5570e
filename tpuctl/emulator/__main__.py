"""`python -m tpuctl.emulator --host H --port P --state-dir D`: serve until SIGTERM/SIGINT.

Prints `export TPUCTL_EMULATOR_HOST=H:P` on stdout once listening.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from tpuctl.emulator.core.server import EmulatorServer
from tpuctl.emulator.storage.server import StorageError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tpuctl.emulator", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8470)
    parser.add_argument("--state-dir", default=None, help="keep state here (default: memory)")
    parser.add_argument("--verbose", action="store_true", help="log every request to stderr")
    parser.add_argument("--no-storage", action="store_true", help="serve no Cloud Storage")
    parser.add_argument(
        "--ssh-port", type=int, default=None, help="the workers' SSH port (default: a free one)"
    )
    parser.add_argument(
        "--unconfined",
        action="store_true",
        help="run worker commands unconfined where bubblewrap cannot run, and Cloud Storage's "
        "server on 127.0.0.1 where it cannot have a network of its own (default: refuse)",
    )
    args = parser.parse_args(argv)

    try:
        server = EmulatorServer(
            args.host,
            args.port,
            args.state_dir,
            verbose=args.verbose,
            storage=not args.no_storage,
            ssh_port=args.ssh_port,
            unconfined=args.unconfined or None,
        )
    except (OSError, ValueError, TypeError, KeyError) as exc:
        print(
            f"error: cannot load the emulator state in {args.state_dir}: {exc!r}; "
            "move its state.json away to start afresh",
            file=sys.stderr,
        )
        return 1
    try:
        server.start()
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    except StorageError as exc:
        print(f"error: cannot start Cloud Storage: {exc}", file=sys.stderr)
        return 1
    warning = server.backend.workers.sandbox.warning()
    if warning:
        print(warning, file=sys.stderr, flush=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    print(f"export TPUCTL_EMULATOR_HOST={server.address}", flush=True)
    try:
        while not stop.wait(3600):
            pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
