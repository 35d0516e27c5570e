"""The live suite's job: standard library only (a TPU VM image need not carry NumPy)."""

import os
import pathlib
import socket

worker = os.environ.get("TPUCTL_WORKER_ID", "?")
workers = os.environ.get("TPUCTL_NUM_WORKERS", "?")
print(f"hello from worker {worker} of {workers} on {socket.gethostname()}")
out = pathlib.Path(os.environ.get("TPUCTL_OUTPUT_DIR", "outputs"))
out.mkdir(parents=True, exist_ok=True)
(out / f"worker-{worker}.txt").write_text("done\n")
