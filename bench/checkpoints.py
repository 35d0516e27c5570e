"""Big checkpoints and many small files: the agent's output sync and restore
(tpuctl/agent/streams.py) side by side with `gcloud storage cp -r` and `gcloud storage
rsync`, all against the same emulated Cloud Storage (fake-gcs-server, in memory).

Two output dirs: one 2 GiB file (written sparsely: 1 MiB of random bytes every 16 MiB,
holes between, so making it is quick and costs little disk) and 5,000 files of 4 KiB in
50 dirs. Each tool uploads the dir, then downloads it into an empty dir, each step a
process of its own on a fresh fake-gcs-server. Measured: wall time of the process,
throughput, and peak RSS: the sum over the process and its children (gcloud runs
several), sampled every 20 ms. The agent runs from its bundle (`python3 -I bundle`), as
on a VM. Figures go to stdout as a Markdown table (docs/performance.md records them).

    .venv/bin/python bench/checkpoints.py [--only small|big] [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tpuctl.agent import bundle  # noqa: E402
from tpuctl.emulator.storage.server import StorageServer  # noqa: E402

BIG = 2 << 30
SMALL_FILES, SMALL_SIZE = 5000, 4096
BUCKET = "bench-ckpt"

# the agent's side: OutputSync as the agent drives it, in a process of its own
AGENT = """
import sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from tpuctl_agent import metadata, transfer
from tpuctl_agent.storage import Storage

class AnyToken(metadata.Token):
    def headers(self, **extra):
        return dict(extra)

mode, url, bucket, local, prefix = sys.argv[2:7]
sync = transfer.OutputSync(Storage(AnyToken(), bucket, url=url), Path(local), prefix)
count = sync.sync() if mode == "sync" else sync.restore()
print(count)
"""


def tree_rss(pid: int) -> int:
    """Resident bytes of `pid` and its descendants, now."""
    total, stack = 0, [pid]
    while stack:
        p = stack.pop()
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
            for task in Path(f"/proc/{p}/task").iterdir():
                stack += [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
    return total


def measure(command: list[str], env: dict[str, str]) -> tuple[float, int]:
    """(wall seconds, peak RSS of the process tree) of one command, which must succeed."""
    elapsed, peak, code, err = measured(command, env)
    if code:
        raise RuntimeError(f"{command[:4]} failed: {err.decode()[-2000:]}")
    return elapsed, peak


def measured(command: list[str], env: dict[str, str]) -> tuple[float, int, int, bytes]:
    """(wall seconds, peak RSS of the process tree, exit code, stderr) of one command."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    peak, done = 0, threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_rss(proc.pid))
            done.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = proc.communicate()
    elapsed = time.perf_counter() - t0
    done.set()
    sampler.join()
    return elapsed, peak, proc.returncode, err


def make_big(path: Path) -> None:
    path.parent.mkdir(parents=True)
    with open(path, "wb") as f:
        f.truncate(BIG)
        for offset in range(0, BIG, 16 << 20):
            f.seek(offset)
            f.write(os.urandom(1 << 20))


def make_small(root: Path) -> None:
    for k in range(SMALL_FILES):
        d = root / f"shard-{k % 50:02d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"part-{k:05d}.bin").write_bytes(os.urandom(SMALL_SIZE))


def files_of(root: Path) -> dict[str, int]:
    files = (p for p in root.rglob("*") if p.is_file())
    return {p.relative_to(root).as_posix(): p.stat().st_size for p in files}


def run_tool(tool: str, src: Path, scratch: Path, agent: Path) -> dict[str, tuple[float, int]]:
    """Upload `src`, then download it into an empty dir, on a fresh fake-gcs-server."""
    server = StorageServer().start()
    try:
        req = urllib.request.Request(
            f"{server.url}/storage/v1/b",
            data=json.dumps({"name": BUCKET}).encode(),
            headers={"Content-Type": "application/json"},
        )
        urllib.request.urlopen(req).close()
        env = dict(os.environ, CLOUDSDK_CONFIG=str(scratch / "gcloud"))
        env["CLOUDSDK_CORE_DISABLE_PROMPTS"] = "1"
        dest = scratch / "dest"
        if tool == "tpuctl":
            base = [sys.executable, "-I", "-c", AGENT, str(agent)]
            up = [*base, "sync", server.url, BUCKET, str(src), "out/"]
            down = [*base, "restore", server.url, BUCKET, str(dest), "out/"]
        else:
            for key, value in (
                ("api_endpoint_overrides/storage", f"{server.url}/storage/v1/"),
                ("auth/disable_credentials", "true"),
                ("core/project", "bench"),
                # on by default for big files, it fails against fake-gcs-server (compose:
                # "ERROR: 'NoneType' object has no attribute 'items'"), and tpuctl does
                # not compose either: a plain resumable upload on both sides
                ("storage/parallel_composite_upload_enabled", "False"),
            ):
                subprocess.run(["gcloud", "config", "set", key, value], env=env,
                               check=True, capture_output=True)  # fmt: skip
            if tool == "gcloud storage cp -r":
                up = ["gcloud", "storage", "cp", "-r", str(src), f"gs://{BUCKET}/"]
                down = ["gcloud", "storage", "cp", "-r", f"gs://{BUCKET}/{src.name}", str(dest)]
                dest.mkdir()
            else:
                up = ["gcloud", "storage", "rsync", "-r", str(src), f"gs://{BUCKET}/out"]
                down = ["gcloud", "storage", "rsync", "-r", f"gs://{BUCKET}/out", str(dest)]
                dest.mkdir()
        result = {"upload": measure(up, env), "download": measure(down, env)}
        got = dest / src.name if tool == "gcloud storage cp -r" else dest
        if files_of(got) != files_of(src):
            raise RuntimeError(f"{tool}: the downloaded files differ from the uploaded ones")
        shutil.rmtree(dest)
        return result
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", choices=["big", "small"])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--tools", default="tpuctl,gcloud storage cp -r,gcloud storage rsync")
    args = parser.parse_args()
    tools = args.tools.split(",")
    if shutil.which("gcloud") is None:
        tools = ["tpuctl"]
        print("gcloud is not installed: tpuctl's figures only\n")
    rows = []
    with tempfile.TemporaryDirectory(prefix="tpuctl-bench-ckpt-") as tmp:
        scratch = Path(tmp)
        agent = scratch / bundle.file_name()
        agent.write_bytes(bundle.build())
        sets = [("big", "one 2 GiB file"), ("small", f"{SMALL_FILES:,} files of 4 KiB")]
        for key, label in sets:
            if args.only and args.only != key:
                continue
            src = scratch / "outputs"
            make_big(src / "ckpt" / "state.bin") if key == "big" else make_small(src)
            size = sum(files_of(src).values())
            for tool in tools:
                try:
                    runs = [run_tool(tool, src, scratch, agent) for _ in range(args.runs)]
                except RuntimeError as e:
                    rows.append(f"| {label} | {tool} | failed: {str(e)[-300:]!r} | | | |")
                    print(rows[-1], file=sys.stderr, flush=True)
                    continue
                for step in ("upload", "download"):
                    wall = statistics.median(r[step][0] for r in runs)
                    peak = max(r[step][1] for r in runs) / 2**20
                    rate = size / wall / 1e6
                    rows.append(
                        f"| {label} | {tool} | {step} | {wall:.2f} s | {rate:.1f} MB/s "
                        f"| {peak:.0f} MiB |"
                    )
                    print(rows[-1], file=sys.stderr, flush=True)
            shutil.rmtree(src)
    print(
        f"## {time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, {args.runs} run(s) each\n"
    )
    print("| output dir | tool | step | wall | throughput | peak RSS |")
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
