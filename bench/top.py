"""`make bench`: the refresh time of `tpuctl top` with 200 nodes across zones.

Creates 200 v5litepod-1 nodes spread over four zones of an emulator running as its own
process on 127.0.0.1 (creates instant), each labelled with a job of its own whose record
and RUNNING status are in the bucket (the worst case: no state is final, so only the
jobs' worker counts are cached), samples every worker's metrics 15 times (a quarter hour
of history at one sample a minute, packed), then times one `top` snapshot as the live
view takes it (`services.metrics.snapshot`: the node list and the metric reads,
concurrent, the jobs' states once the list is in) and the table rendered from it, and the
metrics reads alone and the job states alone. Prints a Markdown table for
docs/performance.md; stops the emulator.
"""

from __future__ import annotations

import io
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RUNS = int(os.environ.get("BENCH_RUNS", "7"))
NODES = int(os.environ.get("BENCH_NODES", "200"))
ZONES = ["us-central1-a", "us-east5-b", "europe-west4-b", "us-south1-a"]
PROJECT = "tpuctl-demo"


def main() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tpuctl.emulator", "--port", "0"],
        stdout=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    assert proc.stdout is not None
    address = proc.stdout.readline().strip().split("=", 1)[1]
    try:
        run(address)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def run(address: str) -> None:
    from google.cloud import tpu_v2

    from tpuctl.cli import top
    from tpuctl.cloud.clients import ClientFactory
    from tpuctl.emulator.control.client import EmulatorControl
    from tpuctl.services import jobs, metrics

    control = EmulatorControl(address, timeout=120)
    control.durations(create=0, delete=0)
    control.capacity({z: {"v5e": None} for z in ZONES})
    control.monitoring(sample_period=None, ingestion_delay=0)
    factory = ClientFactory({"TPUCTL_EMULATOR_HOST": address})
    client = factory.tpu_client()

    bucket_name = f"{PROJECT}-tpuctl"
    store = factory.storage_client(PROJECT).create_bucket(bucket_name)

    def job_id(i: int) -> str:
        return f"20261130-120000-{i:06x}"

    def create(i: int) -> str:
        zone = ZONES[i % len(ZONES)]
        prefix = f"tpuctl/jobs/{job_id(i)}/"
        store.blob(prefix + "job.json").upload_from_string(json.dumps({"workers": 1}))
        status = {"worker": 0, "state": "RUNNING", "attempt": 1}
        store.blob(prefix + "status/worker-0.json").upload_from_string(json.dumps(status))
        node = tpu_v2.Node(accelerator_type="v5litepod-1", runtime_version="v2-alpha-tpuv5-lite",
                           labels={"tpuctl-job": job_id(i)})  # fmt: skip
        parent = f"projects/{PROJECT}/locations/{zone}"
        return client.create_node(parent=parent, node_id=f"b{i:03d}", node=node).result().name

    started = time.monotonic()
    with ThreadPoolExecutor(16) as pool:
        names = list(pool.map(create, range(NODES)))
    made = time.monotonic() - started
    for _ in range(15):
        control.sample()
    tpu, monitoring = factory.tpu(), factory.monitoring
    states = jobs.JobStates(factory.bucket(bucket_name, PROJECT))  # as `top` keeps it

    snap, read, render_s, job_s = [], [], [], []
    for _ in range(RUNS):
        t0 = time.monotonic()
        shot = metrics.snapshot(tpu, monitoring, PROJECT, None, states)
        t1 = time.monotonic()
        from rich.console import Console

        Console(file=io.StringIO(), width=200).print(top.table(shot, "c"))
        t2 = time.monotonic()
        metrics.read(monitoring(), PROJECT)
        t3 = time.monotonic()
        states([job_id(i) for i in range(NODES)])
        job_s.append(time.monotonic() - t3)
        snap.append(t1 - t0)
        render_s.append(t2 - t1)
        read.append(t3 - t2)
        assert len(shot.rows) == NODES and all(r.metrics for r in shot.rows), shot.metrics_error
        assert {r.job_state for r in shot.rows} == {"RUNNING"}
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda n: client.delete_node(name=n).result(), names))

    def ms(values: list[float]) -> str:
        return f"{statistics.median(values) * 1000:.0f} ms (min {min(values) * 1000:.0f})"

    print(f"{NODES} nodes in {len(ZONES)} zones (created in {made:.1f}s), 15 samples each, "
          f"{RUNS} runs, {platform.python_version()}, {os.cpu_count()} CPUs\n")  # fmt: skip
    print("| step | median (min) |\n|---|---|")
    print(f"| snapshot: node list + metrics, concurrent, + job states | {ms(snap)} |")
    print(f"| metrics reads alone (2 list calls) | {ms(read)} |")
    print(f"| job states alone ({NODES} running jobs, 16 at a time) | {ms(job_s)} |")
    print(f"| render the table | {ms(render_s)} |")


if __name__ == "__main__":
    main()
