"""A job that hangs on purpose (docs/observability.md): worker 1 waits for a peer that
never answers, the other workers wait for worker 1 in a collective that never ends."""

import os
import threading

never = threading.Event()


def wait_for_peer() -> None:
    never.wait()  # worker 1: the peer it waits for never answers


def all_reduce() -> None:
    never.wait()  # the others: waiting for worker 1


print("step 0 on worker", os.environ.get("TPUCTL_WORKER_ID", "0"), flush=True)
if os.environ.get("TPUCTL_WORKER_ID") == "1":
    wait_for_peer()
else:
    all_reduce()
