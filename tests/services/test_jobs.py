"""Jobs as the bucket records them (services/jobs.py), in the emulator's Cloud Storage."""

from __future__ import annotations

from tpuctl.agent import protocol
from tpuctl.cloud.storage import Bucket
from tpuctl.services import jobs, staging


def test_statuses_of_many_workers_are_read_in_worker_order(bucket: Bucket) -> None:
    job = staging.new_job_id()
    for w in (11, 2, 0, 30, 1):
        bucket.write_json(protocol.status_path(job, w), {"worker": w, "state": "RUNNING"})
    found = jobs.statuses(bucket, job)
    assert list(found) == [0, 1, 2, 11, 30]
    assert all(found[w]["worker"] == w for w in found)


def test_job_states_read_every_running_jobs_workers(bucket: Bucket) -> None:
    ids = [staging.new_job_id() for _ in range(3)]
    for job, workers, states in zip(ids, (2, 3, 1), (["SUCCEEDED"] * 2, ["RUNNING"], []),
                                    strict=True):  # fmt: skip
        bucket.write_json(protocol.job_record_path(job), {"id": job, "workers": workers})
        for w, state in enumerate(states):
            bucket.write_json(protocol.status_path(job, w), {"worker": w, "state": state})
    gone = staging.new_job_id()  # no record: unreadable
    states = jobs.JobStates(bucket)
    assert states([*ids, gone]) == dict(zip([*ids, gone], ["SUCCEEDED", "RUNNING", "PENDING", "?"],
                                            strict=True))  # fmt: skip
    bucket.write_json(protocol.status_path(ids[0], 0), {"worker": 0, "state": "FAILED"})
    assert states(ids[:1]) == {ids[0]: "SUCCEEDED"}  # a final state is read once


def test_read_logs_reads_each_log_from_where_it_stopped(bucket: Bucket) -> None:
    job = staging.new_job_id()
    bucket.write_json(protocol.job_record_path(job), {"id": job, "workers": 2})
    logs = {w: protocol.log_path(job, 1, w) for w in (0, 1)}
    for w, log in logs.items():
        status = {"worker": w, "attempt": 1, "state": "RUNNING", "log": log}
        bucket.write_json(protocol.status_path(job, w), status)
    bucket.upload_bytes(logs[0], b"zero\n")
    offsets: dict[str, int] = {}

    def read(worker: int | None = None) -> tuple[str, list[tuple[int, bytes]]]:
        state, chunks, _ = jobs.read_logs(bucket, job, offsets, worker)
        return state, list(chunks)

    assert read() == ("RUNNING", [(0, b"zero\n")])
    assert read() == ("RUNNING", [])  # nothing new
    bucket.upload_bytes(logs[0], b"zero\nmore\n")
    bucket.upload_bytes(logs[1], b"one\n")
    before = bucket.received
    assert read()[1] == [(0, b"more\n"), (1, b"one\n")]
    assert offsets == {logs[0]: 10, logs[1]: 4}
    assert bucket.received - before < 1000  # the new bytes and the small JSON objects
    offsets[logs[1]] = 50  # printed from the VM already, ahead of the bucket's copy
    assert read(worker=1)[1] == []


def test_a_job_cancelled_before_any_agent_reported_shows_cancelled(bucket: Bucket) -> None:
    job = staging.new_job_id()  # killed before its agents started: a record, no status
    bucket.write_json(protocol.job_record_path(job), {"id": job, "workers": 2})
    assert jobs.JobStates(bucket)([job]) == {job: "PENDING"}
    done = jobs.cancel(bucket, job)
    assert done.state == "PENDING" and done.marked
    assert jobs.JobStates(bucket)([job]) == {job: "CANCELLED"}
    assert jobs.list_jobs(bucket, job_ids=[job])[0]["state"] == "CANCELLED"
    assert jobs.read_logs(bucket, job, {}).state == "CANCELLED"
