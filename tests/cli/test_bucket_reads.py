"""What tpuctl reads from the bucket, which is shared ground (whoever can write it can
make an object of any size and content): a job's log is read in bounded memory, a terminal
gets its end and a file all of it; one object in a job's status folder that is not a status
hides no job from `jobs`; what a terminal would act on in a job's name is shown escaped."""

from __future__ import annotations

import sys

import pytest

from tpuctl.agent import protocol
from tpuctl.cloud.clients import ClientFactory
from tpuctl.cloud.storage import Bucket
from tpuctl.services import jobs, records, staging

BLOCK = 64 << 10  # the read block in these tests (1 MiB in the product)


@pytest.fixture
def bucket(emulator) -> Bucket:  # noqa: ANN001
    b = ClientFactory().bucket(staging.default_bucket_name("tpuctl-demo"), "tpuctl-demo")
    b.ensure("us-central1")
    return b


def a_job(bucket: Bucket, log: bytes, workers: int = 1) -> str:
    job = staging.new_job_id()
    record = {"id": job, "workers": workers, "project": "tpuctl-demo", "zone": "us-central1-a"}
    bucket.write_json(protocol.job_record_path(job), record)
    for w in range(workers):
        path = protocol.log_path(job, 1, w)
        status = {"worker": w, "attempt": 1, "state": "SUCCEEDED", "log": path}
        bucket.write_json(protocol.status_path(job, w), status)
        bucket.upload_bytes(path, log)
    return job


def lines(count: int) -> bytes:
    return b"".join(b"line %07d of the log\n" % i for i in range(count))


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The length of every ranged read of a log, with the read block made small."""
    monkeypatch.setattr(jobs, "READ_BLOCK", BLOCK)
    monkeypatch.setattr(jobs, "FIRST_BLOCK", 4 << 10)
    seen: list[int] = []
    read_range = Bucket.read_range

    def spy(self: Bucket, path: str, start: int, length: int = BLOCK) -> bytes:
        data = read_range(self, path, start, length)
        seen.append(len(data))
        return data

    monkeypatch.setattr(Bucket, "read_range", spy)
    return seen


def test_a_large_log_is_read_block_by_block_and_a_file_gets_it_all(
    cli, bucket: Bucket, reads: list[int]
) -> None:
    log = lines(20_000)  # 540 KB: about 9 blocks
    job = a_job(bucket, log)
    r = cli("logs", job)
    assert r.code == 0, r.err
    assert r.out.encode() == log
    assert len(reads) >= len(log) // BLOCK and max(reads) <= BLOCK
    assert "not shown" not in r.err


def test_a_terminal_gets_the_end_of_a_long_log_and_is_told_how_to_get_it_all(
    cli, bucket: Bucket, reads: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tpuctl.cli import jobs as jobs_cmd

    monkeypatch.setattr(jobs_cmd, "TERMINAL_TAIL", 100 << 10)
    log = lines(20_000)
    job = a_job(bucket, log)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    r = cli("logs", job)
    assert r.code == 0, r.err
    assert r.out.encode() == log[-(100 << 10) :]
    left_out = len(log) - (100 << 10)
    assert f"the first {left_out:,} bytes of w0's log are not shown here" in r.err
    assert f"tpuctl logs {job} > FILE" in r.err
    assert sum(reads) == 100 << 10  # what was left out was never read


def test_pods_logs_are_read_in_bounded_blocks_each_whole_and_in_order(
    bucket: Bucket, reads: list[int]
) -> None:
    log = lines(8_000)
    job = a_job(bucket, log, workers=3)
    state, chunks, skipped = jobs.read_logs(bucket, job, {})
    got: dict[int, bytes] = {}
    order = []
    for w, data in chunks:
        got[w] = got.get(w, b"") + data
        if not order or order[-1] != w:
            order.append(w)
    assert state == "SUCCEEDED" and skipped == {}
    assert got == {0: log, 1: log, 2: log} and order == [0, 1, 2]  # a log whole, then the next
    assert max(reads) <= BLOCK


def test_a_status_object_that_is_not_a_status_hides_no_job(cli, bucket: Bucket) -> None:
    good = a_job(bucket, b"fine\n")
    bad = a_job(bucket, b"also fine\n", workers=2)
    bucket.upload_bytes(protocol.status_path(bad, 1), b"{not json")
    planted = a_job(bucket, b"x\n", workers=2)
    # worker 1's object claims to be worker 0's status: it must not replace worker 0's
    bucket.write_json(protocol.status_path(planted, 1), {"worker": 0, "state": "FAILED"})
    r = cli("jobs", "--json")
    assert r.code == 0, r.err
    assert good in r.out and bad in r.out and planted in r.out
    st = jobs.statuses(bucket, planted)
    assert st == {0: st[0]} and st[0]["state"] == "SUCCEEDED"


def test_a_record_larger_than_any_tpuctl_writes_is_refused_unread(
    bucket: Bucket, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tpuctl.cloud import object_reads
    from tpuctl.errors import UnreadableObjectError

    monkeypatch.setattr(object_reads, "JSON_LIMIT", 1000)
    bucket.upload_bytes("tpuctl/big.json", b"[" + b"0," * 5000 + b"0]")
    before = bucket.received
    with pytest.raises(UnreadableObjectError, match="is larger than 1,000 bytes"):
        bucket.read_json("tpuctl/big.json")
    assert bucket.received - before <= 1001


@pytest.mark.timeout(60)
@pytest.mark.parametrize("workers, slices", [(10**12, 10**12), ("many", [2]), (-3, True)])
def test_a_record_claiming_absurd_counts_is_shown_as_one_worker(
    cli, bucket: Bucket, workers: object, slices: object
) -> None:
    """Counts of a billion slices would size lists and plans by them; a text, a crash."""
    job = a_job(bucket, b"hi\n")
    record, _ = bucket.read_json(protocol.job_record_path(job))
    bucket.write_json(
        protocol.job_record_path(job), {**record, "workers": workers, "slices": slices}
    )
    for args in (("jobs", "--json"), ("jobs", job, "--json"), ("logs", job)):
        r = cli(*args)
        assert r.code == 0, (args, r.err)
    assert records.read_job_record(bucket, job)["workers"] == 1
    assert records.read_job_record(bucket, job)["slices"] == 1
    assert "hi" in cli("logs", job).out


def test_a_job_name_with_terminal_controls_is_shown_escaped(cli, bucket: Bucket) -> None:
    job = a_job(bucket, b"hi\n")
    record, _ = bucket.read_json(protocol.job_record_path(job))
    record["name"] = "evil\u202etxt.exe\x1b]0;owned\x07"  # reversed text, a terminal title
    bucket.write_json(protocol.job_record_path(job), record)
    r = cli("jobs")
    assert r.code == 0, r.err
    assert "evil\\u202etxt.exe\\x1b]0;owned\\x07" in r.out
    assert "\u202e" not in r.out and "\x1b" not in r.out and "\x07" not in r.out


def test_a_log_shown_on_a_terminal_keeps_its_colours_and_no_other_control(
    cli, bucket: Bucket, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A log in the bucket may be anyone's: on a terminal, OSC (title, clipboard), cursor
    moves and bidirectional controls are shown as escapes; a file gets the bytes as they
    are."""
    log = b"\x1b[32mok\x1b[0m 10%\r20%\n\x1b]52;c;cGF5bG9hZA==\x07\x1b[2J\xe2\x80\xaetxt\n"
    job = a_job(bucket, log)
    piped = cli("logs", job)
    assert piped.code == 0 and piped.out.encode() == log
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    shown = cli("logs", job)
    assert shown.code == 0, shown.err
    assert (
        shown.out == "\x1b[32mok\x1b[0m 10%\r20%\n\\x1b]52;c;cGF5bG9hZA==\\x07\\x1b[2J\\u202etxt\n"
    )
