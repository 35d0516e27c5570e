"""`tpuctl run` overhead on the emulator, for a trivial script.

- invocation -> the script's first line on tpuctl's stdout;
- the script's exit -> the node's deletion request (from the emulator's operation log);
- the whole run.
Median of a few runs; an emulator on 127.0.0.1 started here (create/delete instant), so
what is measured is tpuctl's own overhead: API calls, staging, SSH, agent start, polling.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tpuctl.emulator.core.server import EmulatorServer  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "5"))
SCRIPT = "import time\nprint('first line', flush=True)\nprint('EXIT', time.time(), flush=True)\n"


def delete_time(client, project: str, zone: str, node: str) -> float:  # noqa: ANN001
    ops = client.list_operations(request={"name": f"projects/{project}/locations/{zone}"})
    for op in ops.operations:
        from google.cloud.tpu_v2 import OperationMetadata

        meta = OperationMetadata.deserialize(op.metadata.value)
        if meta.verb == "delete" and meta.target.endswith(f"/nodes/{node}"):
            return datetime.fromisoformat(meta.create_time.isoformat()).timestamp()
    raise RuntimeError(f"no delete operation for {node}")


def main() -> None:
    server = EmulatorServer(host="127.0.0.1", port=0, state_dir=None).start()
    try:
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import tpu_v2

        client = tpu_v2.TpuClient(
            transport="rest",
            credentials=AnonymousCredentials(),
            client_options={"api_endpoint": f"http://{server.address}"},
        )
        import json
        import urllib.request

        req = urllib.request.Request(
            f"http://{server.address}/_emulator/v1/config",
            data=json.dumps({"durations": {"create": 0, "delete": 0}}).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        urllib.request.urlopen(req, timeout=10).read()
        work = Path(tempfile.mkdtemp(prefix="tpuctl-bench-"))
        (work / "job.py").write_text(SCRIPT)
        home = Path(tempfile.mkdtemp(prefix="tpuctl-bench-home-"))
        env = {
            **os.environ,
            "TPUCTL_EMULATOR_HOST": server.address,
            "HOME": str(home),
            "NO_COLOR": "1",
            "XDG_STATE_HOME": str(home / "state"),
        }
        first, to_delete, total = [], [], []
        for _ in range(RUNS):
            t0 = time.time()
            proc = subprocess.Popen(
                [sys.executable, "-m", "tpuctl", "run", str(work / "job.py")],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                text=True,
            )
            assert proc.stdout is not None
            t_first = exit_at = None
            for line in proc.stdout:
                if line.startswith("first line") and t_first is None:
                    t_first = time.time()
                if line.startswith("EXIT"):
                    exit_at = float(line.split()[1])
            err = proc.stderr.read() if proc.stderr else ""
            proc.wait()
            t_end = time.time()
            if proc.returncode or t_first is None or exit_at is None:
                raise RuntimeError(f"run failed ({proc.returncode}): {err}")
            node = next(w for w in err.split() if w.startswith("tpuctl-20"))
            node = node.rstrip(":")
            first.append(t_first - t0)
            to_delete.append(delete_time(client, "tpuctl-demo", "us-central1-a", node) - exit_at)
            total.append(t_end - t0)
        print(f"`tpuctl run` on the emulator, trivial script, {RUNS} runs (median, min-max):\n")
        print("| interval | median | min | max |")
        print("|---|---|---|---|")
        for label, values in (
            ("invocation -> script's first line", first),
            ("script exit -> node deletion request", to_delete),
            ("whole `tpuctl run`", total),
        ):
            print(
                f"| {label} | {statistics.median(values):.2f} s | {min(values):.2f} s | "
                f"{max(values):.2f} s |"
            )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
