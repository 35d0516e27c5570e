"""Environments (`tpuctl run --requirements`) on the emulator, against a package index
served here on 127.0.0.1 (wheels written here: BENCH_ENV_PACKAGES packages of
BENCH_ENV_KB KiB each), every request to it counted.

For each slice size (1 worker, then BENCH_ENV_SLICES, default v3-32 and v3-128: 4 and 16
workers; add v3-512 for 64):
- first run: one worker builds, the others install from the bucket;
- second run of the same requirements: every worker installs from the bucket;
- the same with `--setup "pip install --target ~/site -r requirements.txt"` and no
  environment: every worker asks the index;
- a baseline with neither, so that what each adds to the whole run shows.
"Ready" is the slowest worker's time from the start of its environment step to the venv
being complete (the agents' own clocks, in the job's --json `environment`); "its CPU" the
CPU all the workers' environment steps used, added up (`cpuSeconds`): divided by this
machine's cores, the least time any schedule of them could take here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.cli.env_index import serving  # noqa: E402
from tpuctl.emulator.control.client import EmulatorControl  # noqa: E402
from tpuctl.emulator.core.server import EmulatorServer  # noqa: E402

PACKAGES = int(os.environ.get("BENCH_ENV_PACKAGES", "12"))
KB = int(os.environ.get("BENCH_ENV_KB", "512"))
SLICES = os.environ.get("BENCH_ENV_SLICES", "v3-32,v3-128").split(",")
SETUP = (
    "date +SETUP0=%s.%N && pip install -q --target ~/site -r requirements.txt && date +SETUP1=%s.%N"
)


def setup_seconds(log: str) -> float:
    """The slowest worker's setup, from the times it printed before and after pip."""
    marks: dict[str, dict[str, float]] = {}
    for line in log.splitlines():
        for mark in ("SETUP0=", "SETUP1="):
            if mark in line and "tpuctl-agent" not in line:
                worker = line.split("]")[0] if line.startswith("[") else "w0"
                marks.setdefault(worker, {})[mark] = float(line.split(mark)[1].split()[0])
    return max(m["SETUP1="] - m["SETUP0="] for m in marks.values())


SCRIPT = (  # ~/site: where the --setup variant installs
    "import os, sys\nsys.path.insert(0, os.path.expanduser('~/site'))\n"
    "if os.environ.get('BENCH_IMPORT') != '0':\n    import benchpkg0\n"
    "print('ok', os.environ['TPUCTL_WORKER_ID'])\n"
)


def main() -> None:
    server = EmulatorServer(host="127.0.0.1", port=0, state_dir=None).start()
    work = Path(tempfile.mkdtemp(prefix="tpuctl-bench-envs-"))
    try:
        EmulatorControl(server.address).durations(create=0, delete=0)
        with serving(work / "index") as index:
            for k in range(PACKAGES):
                payload = os.urandom(KB << 10).hex()[: KB << 10]
                deps = [f"benchpkg{k + 1}"] if k + 1 < PACKAGES else []
                index.add(f"benchpkg{k}", "1.0", f"DATA = {payload!r}\n", deps)
            (work / "proj").mkdir()
            (work / "proj" / "job.py").write_text(SCRIPT)
            (work / "proj" / "requirements.txt").write_text("benchpkg0\n")
            home = work / "home"
            home.mkdir()
            env = {**os.environ, "TPUCTL_EMULATOR_HOST": server.address, "HOME": str(home),
                   "NO_COLOR": "1", "XDG_STATE_HOME": str(home / "state")}  # fmt: skip
            rows = []
            for n, accelerator in enumerate(["v3-8", *SLICES]):
                bucket = f"gs://tpuctl-bench-envs-{n}"  # a fresh cache for each size

                def one(*flags: str, bucket: str = bucket, accelerator: str = accelerator):  # noqa: ANN202
                    before = index.count()
                    t0 = time.monotonic()
                    proc = subprocess.run(
                        [sys.executable, "-m", "tpuctl", "run", str(work / "proj" / "job.py"),
                         "-a", accelerator, "--bucket", bucket, "--json",
                         "--env", f"PIP_INDEX_URL={index.url}", *flags],
                        capture_output=True, text=True, env=env, cwd=str(work),
                    )  # fmt: skip
                    wall = time.monotonic() - t0
                    if proc.returncode:
                        raise RuntimeError(f"run {flags} failed: {proc.stderr[-2000:]}")
                    result = json.loads(proc.stdout)
                    return result.get("environment"), wall, index.count() - before, proc.stderr

                first = one()
                second = one()
                setup = one("--no-requirements", "--setup", SETUP)
                base = one("--no-requirements", "--env", "BENCH_IMPORT=0")
                rows.append((accelerator, first, second, setup, base))
        mb = PACKAGES * KB / 1024
        print(f"Environments: {PACKAGES} packages of {KB} KiB ({mb:.1f} MiB of wheels), one "
              "run each; index requests counted at the index\n")  # fmt: skip
        cores = os.cpu_count() or 1
        print(
            "| slice | workers | first run: ready | index requests | second run: ready | "
            f"its CPU, all workers | CPU / {cores} cores | index requests | "
            "`--setup pip install`: slowest worker's setup | index requests |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        for accelerator, first, second, setup, _ in rows:
            workers = sum(first[0]["workers"].values())
            cpu = second[0].get("cpuSeconds", 0.0)
            print(f"| {accelerator} | {workers} | {first[0]['seconds']:.1f} s | {first[2]} | "
                  f"{second[0]['seconds']:.2f} s | {cpu:.2f} s | {cpu / cores:.2f} s | "
                  f"{second[2]} | {setup_seconds(setup[3]):.1f} s | {setup[2]} |")  # fmt: skip
        print()
        print("| slice | whole run: first | second | --setup | baseline (neither) |")
        print("|---|---|---|---|---|")
        for accelerator, first, second, setup, base in rows:
            print(f"| {accelerator} | {first[1]:.1f} s | {second[1]:.1f} s | {setup[1]:.1f} s | "
                  f"{base[1]:.1f} s |")  # fmt: skip
    finally:
        server.stop()
        subprocess.run(["rm", "-rf", str(work)], check=False)


if __name__ == "__main__":
    main()
