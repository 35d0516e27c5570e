"""`tpuctl logs -f` (services/live_logs.py) following the bucket's copy of a log: each look
reads only the bytes past what it printed, never the whole object again (as Bucket counts
what it received)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tpuctl.agent import protocol
from tpuctl.cloud.clients import ClientFactory
from tpuctl.cloud.storage import Bucket
from tpuctl.services import live_logs, staging
from tpuctl.services.staging import JobSpec

MB = 1 << 20


class Printed:
    """What `follow` printed, and a way to wait until it has printed something."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.notes: list[str] = []
        self.changed = threading.Condition()

    def write(self, worker: int, data: bytes) -> None:
        with self.changed:
            self.data += data
            self.changed.notify_all()

    def until(self, size: int, timeout: float = 60.0) -> None:
        """Wait until `size` bytes are printed."""
        with self.changed:
            done = self.changed.wait_for(lambda: len(self.data) >= size, timeout)
            assert done, f"printed {len(self.data)} bytes of {size}"


def test_following_a_10mb_log_downloads_it_about_once(
    bucket: Bucket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(live_logs, "BUCKET_POLL", 0.1)  # many looks, most finding nothing new
    work = tmp_path / "proj"
    work.mkdir()
    (work / "train.py").write_text("print('hi')\n")
    # The job's node is gone (as after a preemption the client did not see): its log can
    # only be followed in the bucket, where its agent's copy keeps growing.
    spec = JobSpec(project="tpuctl-demo", zone="us-central1-a", node="gone", accelerator="v3-8",
                   workers=1, script="train.py", bucket=bucket.name)  # fmt: skip
    job = staging.stage_job(bucket, spec, work).job_id
    log_name = protocol.log_path(job, 1, 0)
    status = {"worker": 0, "attempt": 1, "state": protocol.RUNNING, "pid": 4242,
              "log": log_name, "heartbeat": 1.0, "agent_version": 1}  # fmt: skip
    bucket.write_json(protocol.status_path(job, 0), status)
    log = b"".join(b"%09d %s\n" % (i, b"x" * 89) for i in range(10 * MB // 100))
    bucket.upload_bytes(log_name, log)  # 10 MiB: the agent's first upload

    printed = Printed()
    outcome: list[str] = []
    factory = ClientFactory()
    follower = threading.Thread(
        target=lambda: outcome.append(
            live_logs.follow(
                bucket,
                factory.backends(),
                factory.ssh(),
                job,
                None,
                printed.write,
                printed.notes.append,
            )
        ),
        daemon=True,
    )
    before = bucket.received
    follower.start()
    printed.until(len(log))
    for i in range(5):  # the agent uploads the whole log again as it grows
        log += b"step %d\n" % i
        bucket.upload_bytes(log_name, log)
        printed.until(len(log))
    bucket.write_json(protocol.status_path(job, 0), {**status, "state": protocol.SUCCEEDED,
                                                     "exit_status": 0})  # fmt: skip
    follower.join(timeout=60)
    assert outcome == [protocol.SUCCEEDED]
    assert bytes(printed.data) == log  # all of it, once, in order
    assert any("following the bucket's copy of the log" in n for n in printed.notes)
    received = bucket.received - before
    # Six uploads and many more looks, each reading the whole object, would be > 60 MiB;
    # besides the log once, only the job's small JSON objects are read, at every look.
    assert len(log) <= received < len(log) + MB, received


def test_a_multislice_plan_reaches_only_the_slices_of_the_running_workers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Slice s's worker k is s * per + k, as the agents number them; the record's slice
    count (the shared bucket's) bounds nothing: a forged billion slices costs one plan
    per slice of a running worker, and a worker outside the record is left out."""
    from tpuctl.services import ssh as ssh_service

    planned: list[tuple[str, list[int]]] = []
    monkeypatch.setattr(
        live_logs, "_node_plan", lambda t, s, node, job, workers, r: planned.append((node, workers))
    )
    monkeypatch.setattr(ssh_service, "merged", lambda plans, per: (sorted(plans), per))
    record = {"project": "p", "zone": "z", "node": "n", "slices": 2, "workers": 8}
    got = live_logs.job_plan([], None, record, "j", [1, 5, 6, 9], "no")  # type: ignore[arg-type]
    base = "projects/p/locations/z/nodes/n"
    assert planned == [(f"{base}-0", [1]), (f"{base}-1", [1, 2])] and got == ([0, 1], 4)
    planned.clear()
    forged = dict(record, slices=10**9)  # per = 1: worker 5 is slice 5's
    live_logs.job_plan([], None, forged, "j", [5], "no")  # type: ignore[arg-type]
    assert planned == [(f"{base}-5", [0])]
