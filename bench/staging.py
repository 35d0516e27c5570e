"""`make bench` (part): staging a 1,000-file work dir through the emulator's Cloud Storage.

Times `stage_job` on a fresh bucket (every blob uploaded) and again on the unchanged work
dir (one listing, no blob, the job record), and the agent fetching those 1,000 files
by their manifest. Prints a Markdown table for docs/performance.md. Talks only to an
emulator it starts on 127.0.0.1 and stops at the end.
"""

from __future__ import annotations

import os
import platform
import random
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tpuctl.emulator.control.client import EmulatorControl  # noqa: E402
from tpuctl.emulator.core.server import EmulatorServer  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "5"))
FILES = 1000


def make_workdir(root: Path) -> int:
    rng = random.Random(7)
    total = 0
    for i in range(FILES):
        path = root / f"pkg{i % 25}" / f"mod{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        text = "".join(rng.choice("abcdefgh \n") for _ in range(rng.randint(200, 6000)))
        path.write_text(text)
        total += len(text)
    return total


def row(name: str, times: list[float]) -> str:
    ms = [t * 1000 for t in times]
    return f"| {name} | {statistics.median(ms):.0f} ms | {min(ms):.0f} ms | {max(ms):.0f} ms |"


def main() -> None:
    server = EmulatorServer(host="127.0.0.1", port=0, state_dir=None).start()
    control = EmulatorControl(server.address)
    os.environ["TPUCTL_EMULATOR_HOST"] = server.address
    from tpuctl.cloud.clients import ClientFactory
    from tpuctl.services import staging

    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp) / "work"
            size = make_workdir(work)
            first, second, fetch = [], [], []
            for run in range(RUNS):
                control.reset()
                control.durations(create=0, delete=0)
                bucket = ClientFactory().bucket("bench-tpuctl", "tpuctl-bench")
                bucket.ensure("us-central1")

                spec = partial(
                    staging.JobSpec, "tpuctl-bench", "us-central1-a", "n", "v3-8", 1, "pkg0/mod0.py"
                )
                t0 = time.perf_counter()
                staged = staging.stage_job(bucket, spec(bucket.name), work)
                first.append(time.perf_counter() - t0)
                assert staged.uploaded == FILES
                t0 = time.perf_counter()
                again = staging.stage_job(bucket, spec(bucket.name), work)
                second.append(time.perf_counter() - t0)
                assert again.uploaded == 0
                fetch.append(agent_fetch(server, control, staged.job_id, Path(tmp) / f"f{run}"))
        print(
            f"## {time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} cores, "
            f"Python {platform.python_version()}: {FILES} files, {size / 1e6:.1f} MB\n"
        )
        print("| staging step | median | min | max |\n|---|---|---|---|")
        print(row(f"first run: {FILES} blobs + job.json", first))
        print(row("unchanged second run: listing + job.json", second))
        print(row(f"agent fetch of the {FILES} files (8 threads)", fetch))
    finally:
        server.stop()


def agent_fetch(server: EmulatorServer, control: EmulatorControl, job_id: str, dest: Path) -> float:
    """The agent's fetch_code, in-process, with the env an emulated worker gets."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import tpu_v2

    client = tpu_v2.TpuClient(
        transport="rest",
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": f"http://{server.address}"},
    )
    parent = "projects/bench/locations/us-central1-a"
    node = tpu_v2.Node(accelerator_type="v3-8", runtime_version="tpu-ubuntu2204-base")
    client.create_node(parent=parent, node_id="n", node=node).result()
    os.environ["TPUCTL_METADATA_URL"] = (
        f"http://{server.address}/_emulator/v1/metadata/bench/us-central1-a/n/0/computeMetadata/v1"
    )
    os.environ["TPUCTL_STORAGE_URL"] = str(control.status()["storage_endpoint"])
    import importlib

    import tpuctl.agent.metadata as metadata
    import tpuctl.agent.storage as agent_storage
    import tpuctl.agent.transfer as agent

    metadata = importlib.reload(metadata)  # they read the endpoints when imported
    agent_storage = importlib.reload(agent_storage)
    storage = agent_storage.Storage(metadata.Token(), "bench-tpuctl")
    t0 = time.perf_counter()
    agent.fetch_code(storage, job_id, dest)
    elapsed = time.perf_counter() - t0
    client.delete_node(name=f"{parent}/nodes/n").result()
    return elapsed


if __name__ == "__main__":
    main()
