"""`tpuctl logs` of a job whose log object is 300 MiB: peak RSS and wall time.

The bucket is shared ground: whoever can write it can make a job's log object as large as
they like, and `tpuctl logs` reads it in blocks (1 MiB at a time, services/jobs.py), so
its memory stays that of a small log whatever the size. One job record, one status and
one log of LOG_MIB MiB of text lines on the emulator's Cloud Storage (in memory); then
`tpuctl logs JOB > /dev/null` and `tpuctl logs` of a job with a 10 KB log, each a process
of its own (bench/checkpoints.py's sampler: the process tree's RSS every 20 ms).

    .venv/bin/python bench/logs.py [--mib 300]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from checkpoints import measure  # noqa: E402

from tpuctl.agent import protocol  # noqa: E402
from tpuctl.emulator.core.server import EmulatorServer  # noqa: E402
from tpuctl.services import staging  # noqa: E402

LOG_MIB = 300


def a_job(bucket, log: Path) -> str:  # noqa: ANN001
    job = staging.new_job_id()
    record = {"id": job, "workers": 1, "project": "tpuctl-demo", "zone": "us-central1-a"}
    bucket.write_json(protocol.job_record_path(job), record)
    path = protocol.log_path(job, 1, 0)
    status = {"worker": 0, "attempt": 1, "state": "SUCCEEDED", "log": path}
    bucket.write_json(protocol.status_path(job, 0), status)
    bucket.upload_file(path, log)
    return job


def write_log(path: Path, size: int) -> None:
    line = b"step 0000000 loss 1.2345 lr 3.0e-04 tokens/s 123456 something else to say\n"
    block = line * (1 << 20 // len(line) + 1)
    with path.open("wb") as f:
        while f.tell() < size:
            f.write(block[: size - f.tell()])


@contextlib.contextmanager
def emulated_bucket(home: str) -> Iterator[tuple[Any, dict[str, str]]]:
    """An emulator of this process's, its project's default bucket made, and the
    environment a tpuctl process needs to use it (HOME: `home`)."""
    server = EmulatorServer(host="127.0.0.1", port=0, state_dir=None).start()
    try:
        env = dict(os.environ, TPUCTL_EMULATOR_HOST=server.address, HOME=home, NO_COLOR="1")
        env["TPUCTL_CONFIG"] = str(Path(home) / "config.toml")
        os.environ["TPUCTL_EMULATOR_HOST"] = server.address
        from tpuctl.cloud.clients import ClientFactory

        bucket = ClientFactory().bucket(staging.default_bucket_name("tpuctl-demo"), "tpuctl-demo")
        bucket.ensure("us-central1")
        yield bucket, env
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=LOG_MIB)
    mib = parser.parse_args().mib
    with (
        tempfile.TemporaryDirectory(prefix="tpuctl-bench-logs-") as tmp,
        emulated_bucket(tmp) as (bucket, env),
    ):
        rows = []
        for label, size in ((f"{mib} MiB", mib << 20), ("10 KB", 10_000)):
            log = Path(tmp) / "log"
            write_log(log, size)
            job = a_job(bucket, log)
            tpuctl = f"{sys.executable} -m tpuctl logs {job} --project tpuctl-demo"
            seconds, peak = measure(["bash", "-c", f"{tpuctl} > /dev/null"], env)
            rows.append((label, seconds, peak))
    print("| log object | wall | peak RSS (process tree) |")
    print("|---|---|---|")
    for label, seconds, peak in rows:
        print(f"| {label} | {seconds:.1f} s | {peak / 1e6:.0f} MB |")


if __name__ == "__main__":
    main()
