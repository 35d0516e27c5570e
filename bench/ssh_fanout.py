"""`make bench`: time to run `true` on every worker of emulated slices of 1-256 workers.

For v4-8 (1 worker), v4-64 (8), v4-256 (32), v4-512 (64), v4-1024 (128) and v4-2048
(256): the wall time of
tpuctl's fan-out (`tpuctl exec NAME -- true`, minus process start-up) with all workers
at once, beside the same done one worker at a time (`--max-parallel 1`), the client's
CPU time per worker, the emulator's (its SSH servers, and the sandboxed processes they
start) per worker, and `sleep 1` on all workers at once. Each run opens fresh SSH
connections (key exchange, auth, a process per worker). The emulator
runs as its own process on 127.0.0.1, so client and servers do not share an
interpreter; it is stopped at the end. Prints a Markdown table for docs/performance.md.
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RUNS = int(os.environ.get("BENCH_RUNS", "5"))
SLICES = [
    ("v4-8", 1),
    ("v4-64", 8),
    ("v4-256", 32),
    ("v4-512", 64),
    ("v4-1024", 128),
    ("v4-2048", 256),
]
V4_QUOTAS = ("TPUV4sPodPerProjectPerRegionForTPUAPI", "TPUV4sPodPerProjectPerZoneForTPUAPI")
ZONE = "us-central2-b"


def start_emulator() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tpuctl.emulator", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()  # export TPUCTL_EMULATOR_HOST=127.0.0.1:PORT
    return proc, line.split("=", 1)[1]


def cpu_seconds(pid: int) -> float:
    """CPU time of process `pid` and of its children that have ended (Linux procfs)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    scratch = tempfile.mkdtemp(prefix="tpuctl-bench-")
    os.environ.update(
        HOME=f"{scratch}/home", XDG_STATE_HOME=f"{scratch}/state", TPUCTL_PROJECT="tpuctl-bench"
    )
    proc, address = start_emulator()
    os.environ["TPUCTL_EMULATOR_HOST"] = address
    from tpuctl import catalog
    from tpuctl.cloud.clients import ClientFactory
    from tpuctl.emulator.control.client import EmulatorControl
    from tpuctl.models import CreateSpec
    from tpuctl.services import remote, ssh
    from tpuctl.services.names import owner_label
    from tpuctl.services.nodes import create_node

    try:
        control = EmulatorControl(address)
        control.durations(create=0, delete=0)
        control.quotas(dict.fromkeys(V4_QUOTAS, 4096))  # 256 workers are 1,024 v4 chips
        factory = ClientFactory()
        api, ssh_api = factory.tpu(), factory.ssh()
        owner = owner_label(factory.required_account("the bench's nodes"))
        from tpuctl.config import resolve_target

        target = resolve_target("tpuctl-bench", ZONE)
        print(
            f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
            f"{platform.python_version()}; median of {RUNS} runs, fresh connections each\n"
        )
        print(
            "| workers | `true`, all at once | x 64 workers' | `true`, one at a time | ratio "
            "| tpuctl CPU per worker | emulator CPU per worker | `sleep 1`, all at once |"
        )
        print("|---|---|---|---|---|---|---|---|")
        at_64 = None
        for accelerator, workers in SLICES:
            name = f"bench-{workers}"
            spec = CreateSpec(name, catalog.shape(accelerator), owner=owner)
            create_node(api, target, spec)
            plan = ssh.plan(api, ssh_api, f"{target.parent}/nodes/{name}", "all")
            times, cpu, server_cpu = {}, {}, {}
            for parallel in (0, 1):
                samples, cpu_samples, server_samples = [], [], []
                for _ in range(RUNS):
                    s0 = cpu_seconds(proc.pid)
                    t0, c0 = time.perf_counter(), time.process_time()
                    results = remote.run_command(
                        ssh_api, plan, "true", lambda *_: None, max_parallel=parallel
                    )
                    samples.append(time.perf_counter() - t0)
                    cpu_samples.append(time.process_time() - c0)
                    server_samples.append(cpu_seconds(proc.pid) - s0)
                    assert remote.exit_status(results) == 0, results
                times[parallel] = statistics.median(samples)
                cpu[parallel] = statistics.median(cpu_samples)
                server_cpu[parallel] = statistics.median(server_samples)
            if workers == 64:
                at_64 = times[0]
            versus = f"{times[0] / at_64:.1f}x" if at_64 else "-"
            t0 = time.perf_counter()
            results = remote.run_command(ssh_api, plan, "sleep 1", lambda *_: None)
            sleep_time = time.perf_counter() - t0
            assert remote.exit_status(results) == 0, results
            print(
                f"| {workers} ({accelerator}) | {times[0] * 1000:.0f} ms | {versus} | "
                f"{times[1] * 1000:.0f} ms | {times[1] / times[0]:.1f}x | "
                f"{cpu[0] * 1000 / workers:.1f} ms | {server_cpu[0] * 1000 / workers:.1f} ms | "
                f"{sleep_time * 1000:.0f} ms |",
                flush=True,
            )
            api.delete_node(f"{target.parent}/nodes/{name}")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
