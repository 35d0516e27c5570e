"""CPU time of a command's heavy imports (Google's clients, asyncssh, rich, click:
what `tpuctl list` or `run` imports) under Python's default garbage-collection
thresholds and under tpuctl's (tpuctl/entry.py, GC_THRESHOLDS): each a fresh
interpreter, the median of a few."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tpuctl.entry import GC_THRESHOLDS  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "7"))
IMPORTS = (  # what a command that reaches both APIs and the bucket imports
    "google.cloud.tpu_v2, google.cloud.storage, google.cloud.cloudquotas_v1, "
    "google.cloud.service_usage_v1, asyncssh, rich, click"
)
PROBE = """
import gc, sys, time
if sys.argv[1] != "default":
    gc.set_threshold(*map(int, sys.argv[1].split(",")))
start = time.process_time()
import {imports}  # noqa
print(time.process_time() - start)
"""


def seconds(thresholds: str) -> float:
    code = PROBE.format(imports=IMPORTS)
    out = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code, thresholds],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return float(out.strip().splitlines()[-1])


def main() -> None:
    tuned = ",".join(map(str, GC_THRESHOLDS))
    got: dict[str, list[float]] = {"default": [], tuned: []}
    for _ in range(RUNS):  # interleaved, so that a busy moment weighs on both alike
        for key in got:
            got[key].append(seconds(key))
    base = statistics.median(got["default"])
    for key, values in got.items():
        m = statistics.median(values)
        print(
            f"imports, gc thresholds {key}: {m:.2f} s CPU (median of {RUNS}), "
            f"{(m - base) / base:+.0%}"
        )


if __name__ == "__main__":
    main()
