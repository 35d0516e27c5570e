"""What `tpuctl profile` brings home from the shared bucket: only the traces the workers
said over SSH, only with the size and sha256 they said; what a worker's stdout says is
read as data (names not of that worker, and lines not JSON, are passed over)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tpuctl.agent import protocol
from tpuctl.services import profile

JOB = "20261129-153012-ab12cd"
STAMP = "20261129-153100"


def _trace(bucket, worker: int, said: bytes, stored: bytes | None = None) -> profile.Trace:  # noqa: ANN001
    name = f"worker-{worker}"
    if stored is not None:
        bucket.upload_bytes(protocol.profile_path(JOB, STAMP, name), stored)
    digest = hashlib.sha256(said).hexdigest()
    return profile.Trace(worker, name, len(said), digest, "jax", 0.0)


def test_only_what_the_workers_said_comes_home(bucket, tmp_path: Path) -> None:
    taken = profile.Profile(STAMP)
    taken.traces = [
        _trace(bucket, 0, b"trace of w0", b"trace of w0"),  # as uploaded
        _trace(bucket, 1, b"trace of w1", b"trace of wX"),  # same size, other content
        _trace(bucket, 2, b"trace of w2", b"a longer trace of w2"),  # other size
        _trace(bucket, 3, b"trace of w3"),  # not in the bucket
    ]
    bucket.upload_bytes(protocol.profile_path(JOB, STAMP, "worker-9"), b"nobody said it")
    home = profile.bring_home(bucket, JOB, taken, tmp_path / "home")
    run = tmp_path / "home" / "plugins" / "profile" / STAMP
    assert home.written == [run / "worker-0.xplane.pb"]
    assert sorted(p.name for p in run.iterdir()) == ["worker-0.xplane.pb"]  # no part files
    assert (run / "worker-0.xplane.pb").read_bytes() == b"trace of w0"
    assert home.refused == {
        "worker-1": "its content changed in the bucket since it was uploaded",
        "worker-2": "the bucket's object has 20 bytes, the worker uploaded 11: left there",
        "worker-3": "the bucket's object has no bytes, the worker uploaded 11: left there",
    }


def test_a_workers_stdout_is_read_as_data() -> None:
    good = {"name": "worker-1", "size": 5, "sha256": "ab" * 32, "framework": "jax", "began": 1.5}
    lines = [
        json.dumps(good),
        json.dumps(dict(good, name="worker-1-4242")),  # a second process of worker 1
        json.dumps(dict(good, name="worker-0")),  # another worker's name
        json.dumps(dict(good, name="../../etc/passwd")),
        json.dumps(dict(good, size="many")),
        "not json",
    ]
    said = profile._said(1, "\n".join(lines))
    assert [(t.worker, t.name, t.size, t.framework) for t in said] == [
        (1, "worker-1", 5, "jax"),
        (1, "worker-1-4242", 5, "jax"),
    ]


def test_every_worker_gets_one_start_after_the_last_is_connected(monkeypatch) -> None:
    import asyncio
    import time

    monkeypatch.setattr(profile, "LEAD", 2.0)
    monkeypatch.setattr(profile, "GATHER", 0.5)

    async def arrive(start: profile._Start, worker: int, after: float) -> tuple[float, float]:
        await asyncio.sleep(after)
        return time.time(), await start.when(worker)

    async def main(expected: int) -> list[tuple[float, float]]:
        start = profile._Start(expected)
        return list(await asyncio.gather(arrive(start, 0, 0.0), arrive(start, 1, 0.2)))

    (first, at0), (last, at1) = asyncio.run(main(2))
    assert at0 == at1 and last + 2.0 <= at1 < last + 3.0  # from the last one connected
    (first, at0), (last, at1) = asyncio.run(main(3))  # worker 2 never connects
    assert at0 == at1 and first + 2.5 <= at1 < first + 3.5  # GATHER, then the lead
