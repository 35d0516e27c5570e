"""What a co-writer's gzip-encoded objects cost the laptop: peak RSS and wall time of
`tpuctl jobs`, `jobs JOB`, `logs JOB` and `outputs JOB --unverified` when a job's status,
log, receipt and one output are each about 1 MiB of gzip that decodes to GiBs (stored
with `Content-Encoding: gzip`, as any principal that can write the bucket may store it),
beside the same commands on a job with small, honest objects.

tpuctl reads every object's stored bytes, bounded, and never decodes them (cloud/storage.py:
an encoded object is refused, naming it), so both columns should be about the same. Each
command is a process of its own (bench/checkpoints.py's sampler: the process tree's RSS
every 20 ms); a command may fail (a log that cannot be read is an error), which is what
it should do.

    .venv/bin/python bench/hostile.py [--gib 1]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from checkpoints import measured  # noqa: E402
from logs import emulated_bucket  # noqa: E402

from tpuctl.agent import protocol  # noqa: E402
from tpuctl.services import staging  # noqa: E402


def bomb(gib: int) -> bytes:
    """gzip that decodes to `gib` GiB of zeros (about 1 MiB per GiB)."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(1 << 20)
    return b"".join(z.compress(zeros) for _ in range(gib << 10)) + z.flush()


def a_job(bucket, data: bytes | None) -> str:  # noqa: ANN001
    """A job whose status, log, receipt and output are `data`, gzip-encoded (None: small
    honest objects)."""
    from tpuctl.cloud.clients import ClientFactory

    client = ClientFactory().storage_client("tpuctl-demo").bucket(bucket.name)
    job = staging.new_job_id()
    log = protocol.log_path(job, 1, 0)
    honest = {
        protocol.job_record_path(job): json.dumps({"id": job, "workers": 1}).encode(),
        protocol.status_path(job, 0): json.dumps(
            {"worker": 0, "attempt": 1, "state": "SUCCEEDED", "log": log}
        ).encode(),
        log: b"step 1 loss 0.5\n" * 1000,
        protocol.job_path(job, "receipt.json"): b"{}",
        protocol.outputs_prefix(job) + "ckpt.bin": b"\0" * 10_000,
    }
    for name, value in honest.items():
        blob = client.blob(name)
        if data is not None and not name.endswith("job.json"):
            blob.content_encoding = "gzip"
            value = data
        blob.upload_from_string(value)
    return job


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gib", type=int, default=1)
    gib = parser.parse_args().gib
    hostile = bomb(gib)
    rows = []
    with (
        tempfile.TemporaryDirectory(prefix="tpuctl-bench-hostile-") as tmp,
        emulated_bucket(tmp) as (bucket, env),
    ):
        jobs = {"honest": a_job(bucket, None), "hostile": a_job(bucket, hostile)}
        for label, args in (
            ("jobs (lists both jobs)", ["jobs"]),
            ("jobs JOB", ["jobs", "{job}"]),
            ("logs JOB", ["logs", "{job}"]),
            ("outputs JOB --unverified", ["outputs", "{job}", f"{tmp}/out", "--unverified"]),
        ):
            row = [label]
            for kind in ("honest", "hostile"):
                argv = [a.replace("{job}", jobs[kind]) for a in args]
                cmd = [sys.executable, "-m", "tpuctl", *argv, "--project", "tpuctl-demo"]
                seconds, peak, code, _ = measured(cmd, env)
                row.append(f"{peak / 1e6:.0f} MB, {seconds:.1f} s, exit {code}")
            rows.append(row)
    print(f"gzip objects of {len(hostile) / 1e6:.1f} MB decoding to {gib} GiB each")
    print("| command | honest objects | gzip-encoded objects |")
    print("|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
