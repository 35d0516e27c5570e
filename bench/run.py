"""`make bench`: wall time of tpuctl's start-up, of `tpuctl list` and of a TAB completion
against the emulator, each beside its anchor in the same run.

Median (and min/max) of repeated runs of each command as a fresh process, printed as a
Markdown table for docs/performance.md, then the ratios the targets are stated in:
`tpuctl --help` against `python -c pass`, `tpuctl list` against `gcloud compute tpus tpu-vm
list` (the median of the ratios of pairs run back to back, so that a busy moment weighs on
both), a completion from the cache against 0.15 s.

The commands run with bytecode written (as an installed tpuctl has it, whatever
PYTHONDONTWRITEBYTECODE the caller's shell sets) and with a scratch state dir, where the
kept help and the completion cache go. Talks only to an emulator it starts on 127.0.0.1
and stops at the end.
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
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tpuctl.emulator.core.server import EmulatorServer  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "15"))


COMPLETION_TARGET = 0.15  # seconds, for a TAB answered from the cache


def run_once(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """The wall time of one run of `cmd` and the CPU time (user + system) it used, its
    children's included: on a shared machine the CPU time moves less with the load."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    stderr = proc.stderr.read()  # until the process closes it, at its end
    proc.stderr.close()
    _, status, usage = os.wait4(proc.pid, 0)  # reaped here, with what it used
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {stderr.decode()}")
    return wall, usage.ru_utime + usage.ru_stime


def once(cmd: list[str], env: dict[str, str]) -> float:
    return run_once(cmd, env)[0]


def timed(
    cmd: list[str], env: dict[str, str], before: Callable[[], None] = lambda: None
) -> tuple[list[float], list[float]]:
    """Wall and CPU times of RUNS runs of `cmd` (`before` each one), after one to warm the
    caches."""
    before()
    run_once(cmd, env)
    walls, cpus = [], []
    for _ in range(RUNS):
        before()
        wall, cpu = run_once(cmd, env)
        walls.append(wall)
        cpus.append(cpu)
    return walls, cpus


def paired(a: tuple[list[str], dict[str, str]], b: tuple[list[str], dict[str, str]]) -> list[float]:
    """Ratios a/b of RUNS pairs, each pair run back to back (their order alternating), so
    that a moment when the machine is busy slows both sides of a pair."""
    once(*a), once(*b)  # warm both
    ratios = []
    for i in range(RUNS):
        if i % 2:
            tb, ta = once(*b), once(*a)
        else:
            ta, tb = once(*a), once(*b)
        ratios.append(ta / tb)
    return ratios


def post(addr: str, path: str, body: dict) -> None:
    req = urllib.request.Request(
        f"http://{addr}/_emulator/v1/{path}",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    urllib.request.urlopen(req, timeout=10).read()


LIST = "tpuctl list (15 TPU API nodes + 4 on Compute Engine, both APIs read)"
GCLOUD = "gcloud compute tpus tpu-vm list (15 nodes)"
TAB = "TAB completion of a node name, from the cache"


def main() -> None:
    server = EmulatorServer(host="127.0.0.1", port=0, state_dir=None)
    server.start()
    state = tempfile.mkdtemp(prefix="tpuctl-bench-state.")
    try:
        env = {**os.environ, "TPUCTL_EMULATOR_HOST": server.address, "NO_COLOR": "1"}
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed tpuctl has its bytecode
        env["TPUCTL_STATE_DIR"] = state
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
        kept_help = Path(state) / "help.txt"
        tpuctl_list = [py, "-m", "tpuctl", "list", "-p", "tpuctl-bench", "-z", "us-central1-a"]
        # a TAB after `tpuctl describe ... bench-1`, answered from the completion cache
        words = "tpuctl describe -p tpuctl-bench -z us-central1-a bench-1"
        tab_env = {**env, "_TPUCTL_COMPLETE": "bash_complete", "COMP_WORDS": words,
                   "COMP_CWORD": str(len(words.split()) - 1)}  # fmt: skip
        tab = [py, "-m", "tpuctl"]
        offered = subprocess.run(tab, env=tab_env, capture_output=True, text=True, check=True)
        # the cache is filled, and right (click's answer: a `plain,WORD` line each)
        assert "plain,bench-10" in offered.stdout.split(), offered
        cases: list[tuple[str, list[str], dict[str, str], Callable[[], None]]] = [
            ("python -c pass", [py, "-c", "pass"], env, lambda: None),
            ("tpuctl --help", [py, "-m", "tpuctl", "--help"], env, lambda: None),
            (
                "tpuctl --help (first, no kept copy)",
                [py, "-m", "tpuctl", "--help"],
                env,
                lambda: kept_help.unlink(missing_ok=True),
            ),
            ("tpuctl --version", [py, "-m", "tpuctl", "--version"], env, lambda: None),
            (LIST, tpuctl_list, env, lambda: None),
            (
                "tpuctl list --json --all-zones",
                [py, "-m", "tpuctl", "list", "-p", "tpuctl-bench", "--all-zones", "--json"],
                env,
                lambda: None,
            ),
            (TAB, tab, tab_env, lambda: None),  # RUNS runs take well under the cache's 30 s
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
            cases.append((GCLOUD, gcloud_list, genv, lambda: None))
        print(
            f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
            f"{platform.python_version()}; {RUNS} runs each; load average "
            f"{os.getloadavg()[0]:.1f}\n"
        )
        print("| command | median | min | max | CPU (median) |")
        print("|---|---|---|---|---|")
        medians = {}
        for label, cmd, cmd_env, before in cases:
            t, cpu = timed(cmd, cmd_env, before)
            medians[label] = statistics.median(t)
            print(
                f"| `{label}` | {statistics.median(t) * 1000:.0f} ms | "
                f"{min(t) * 1000:.0f} ms | {max(t) * 1000:.0f} ms | "
                f"{statistics.median(cpu) * 1000:.0f} ms |"
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
            f"{max(t) * 1000:.2f} ms | - |"
        )
        bare = medians["python -c pass"]
        helps = paired(([py, "-m", "tpuctl", "--help"], env), ([py, "-c", "pass"], env))
        print(
            f"\n`tpuctl --help` / `python -c pass`: median of {RUNS} pairs "
            f"{statistics.median(helps):.1f}x (target: at most 1.5x); of the medians above "
            f"{medians['tpuctl --help'] / bare:.1f}x"
        )
        first = medians["tpuctl --help (first, no kept copy)"] / bare
        print(f"`tpuctl --help` with no kept copy / `python -c pass`: {first:.1f}x")
        print(f"a TAB completion from the cache: {medians[TAB] * 1000:.0f} ms "
              f"(target: at most {COMPLETION_TARGET * 1000:.0f} ms)")  # fmt: skip
        if gcloud:
            ratios = paired((tpuctl_list, env), (gcloud_list, genv))
            print(
                f"`tpuctl list` (both APIs) / `gcloud compute tpus tpu-vm list`: median of "
                f"{RUNS} pairs {statistics.median(ratios):.2f}x (min {min(ratios):.2f}x, max "
                f"{max(ratios):.2f}x; target: at most 0.5x); of the medians above "
                f"{medians[LIST] / medians[GCLOUD]:.2f}x"
            )
        print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    finally:
        server.stop()
        shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    main()
