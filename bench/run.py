"""`make bench`: wall time of tpuctl's start-up and of `tpuctl list` against the emulator.

Median (and min/max) of repeated runs of each command as a fresh process, beside
`python -c pass`, printed as a Markdown table for docs/performance.md.
Talks only to an emulator it starts on 127.0.0.1 and stops at the end.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tpuctl.emulator.core.server import EmulatorServer  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "15"))


def timed(cmd: list[str], env: dict[str, str]) -> list[float]:
    subprocess.run(cmd, env=env, capture_output=True, check=True)  # warm the page cache
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, capture_output=True, check=True)
        times.append(time.perf_counter() - t0)
    return times


def post(addr: str, path: str, body: dict) -> None:
    req = urllib.request.Request(
        f"http://{addr}/_emulator/v1/{path}",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    urllib.request.urlopen(req, timeout=10).read()


LIST = "tpuctl list (15 TPU API nodes + 4 on Compute Engine, both APIs read)"


def main() -> None:
    server = EmulatorServer(host="127.0.0.1", port=0, state_dir=None)
    server.start()
    try:
        env = {**os.environ, "TPUCTL_EMULATOR_HOST": server.address, "NO_COLOR": "1"}
        post(server.address, "config", {"durations": {"create": 0}})
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import tpu_v2

        client = tpu_v2.TpuClient(
            transport="rest",
            credentials=AnonymousCredentials(),
            client_options={"api_endpoint": f"http://{server.address}"},
        )
        parent = "projects/tpuctl-bench/locations/us-central1-a"
        for i in range(15):  # within a granted v3 quota (128 cores per zone)
            client.create_node(
                parent=parent,
                node_id=f"bench-{i}",
                node=tpu_v2.Node(accelerator_type="v3-8", runtime_version="tpu-ubuntu2204-base"),
            ).result()
        py = sys.executable
        # and on Compute Engine, in the same zone: 3 single-host v5p VMs and a 2-host slice
        # (its policy, template and MIG), so that `list` reads both APIs as a user's would
        for name, acc in (("ce-0", "v5p-8"), ("ce-1", "v5p-8"), ("ce-2", "v5p-8"),
                          ("ce-slice", "v5p-16")):  # fmt: skip
            subprocess.run(
                [py, "-m", "tpuctl", "create", name, "-a", acc, "--api", "compute",
                 "-p", "tpuctl-bench", "-z", "us-central1-a"],
                env=env, check=True, capture_output=True,
            )  # fmt: skip
        cases = [
            ("python -c pass", [py, "-c", "pass"]),
            ("tpuctl --help", [py, "-m", "tpuctl", "--help"]),
            ("tpuctl --version", [py, "-m", "tpuctl", "--version"]),
            (
                LIST,
                [py, "-m", "tpuctl", "list", "-p", "tpuctl-bench", "-z", "us-central1-a"],
            ),
            (
                "tpuctl list --json --all-zones",
                [py, "-m", "tpuctl", "list", "-p", "tpuctl-bench", "--all-zones", "--json"],
            ),
        ]
        gcloud = shutil.which("gcloud")
        if gcloud:  # the anchor the issue names: the same list through gcloud
            scratch = tempfile.mkdtemp(prefix="tpuctl-bench-gcloud.")
            genv = {
                **env,
                "CLOUDSDK_CONFIG": scratch,
                "CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU": f"http://{server.address}/",
                "CLOUDSDK_AUTH_DISABLE_CREDENTIALS": "true",
                "CLOUDSDK_CORE_PROJECT": "tpuctl-bench",
                "CLOUDSDK_CORE_DISABLE_USAGE_REPORTING": "true",
            }
            gcloud_list = [gcloud, "compute", "tpus", "tpu-vm", "list", "--zone", "us-central1-a"]
        print(
            f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
            f"{platform.python_version()}; {RUNS} runs each\n"
        )
        print("| command | median | min | max |")
        print("|---|---|---|---|")
        medians = {}
        runs = [(label, cmd, env) for label, cmd in cases]
        if gcloud:
            runs.append(("gcloud compute tpus tpu-vm list (15 nodes)", gcloud_list, genv))
        for label, cmd, cmd_env in runs:
            t = timed(cmd, cmd_env)
            medians[label] = statistics.median(t)
            print(
                f"| `{label}` | {statistics.median(t) * 1000:.0f} ms | "
                f"{min(t) * 1000:.0f} ms | {max(t) * 1000:.0f} ms |"
            )
        # One API round trip, in-process, to show the server's own latency.
        t = []
        for _ in range(200):
            t0 = time.perf_counter()
            client.get_node(name=f"{parent}/nodes/bench-0")
            t.append(time.perf_counter() - t0)
        print(
            f"| emulator round trip (get_node, in-process client, 200 calls) | "
            f"{statistics.median(t) * 1000:.2f} ms | {min(t) * 1000:.2f} ms | "
            f"{max(t) * 1000:.2f} ms |"
        )
        bare = medians["python -c pass"]
        print(f"\n`tpuctl --help` / `python -c pass`: {medians['tpuctl --help'] / bare:.1f}x")
        gl = "gcloud compute tpus tpu-vm list (15 nodes)"
        if gl in medians:
            ratio = medians[LIST] / medians[gl]
            print(f"`tpuctl list` (both APIs) / `gcloud compute tpus tpu-vm list`: {ratio:.2f}x")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
