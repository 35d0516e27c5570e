"""The Bucket adapter against the emulator's Cloud Storage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from google.api_core import exceptions as gx

from tpuctl.cloud.clients import ClientFactory
from tpuctl.cloud.storage import Bucket
from tpuctl.errors import (
    AccessDeniedError,
    AlreadyExistsError,
    CloudError,
    ConfigError,
    NotFoundError,
    PreconditionFailedError,
    UnreadableObjectError,
    UsageError,
)


@pytest.fixture
def bucket(emulator) -> Bucket:
    b = ClientFactory().bucket("tpuctl-demo-tpuctl", "tpuctl-demo")
    assert b.ensure("us-central1") is True
    return b


def test_ensure_is_idempotent_and_the_factory_points_at_the_emulator(emulator, bucket) -> None:
    assert bucket.ensure("us-central1") is False
    assert [b.name for b in emulator.storage_client().list_buckets()] == ["tpuctl-demo-tpuctl"]
    assert ClientFactory().storage_client().project == "tpuctl-demo"  # the emulator's default


def test_factory_errors_without_storage(isolated_env, monkeypatch) -> None:  # noqa: ANN001
    from tpuctl.emulator.core.server import EmulatorServer

    with EmulatorServer(port=0, storage=False) as bare:
        address = bare.address
        monkeypatch.setenv("TPUCTL_EMULATOR_HOST", address)
        with pytest.raises(ConfigError, match="serves no Cloud Storage"):
            ClientFactory().bucket("b")
    # stopped: nothing answers at its address any more
    with pytest.raises(CloudError, match="cannot reach the local emulator") as info:
        ClientFactory().bucket("b")
    assert "tpuctl emulator start" in (info.value.hint or "")


def test_a_refused_creation_says_so(emulator) -> None:
    with pytest.raises(UsageError) as info:
        ClientFactory().bucket("Bad-Name", "tpuctl-demo").ensure("us-central1")
    assert "cannot create the bucket gs://Bad-Name: invalid bucket name" in str(info.value)
    assert "--bucket" in (info.value.hint or "")
    with pytest.raises(UsageError, match="invalid bucket name gs://-x-"):
        ClientFactory().bucket("-x-", "tpuctl-demo")


class _Refusing:
    """A storage client whose bucket name belongs to someone else (no such case in the
    emulator: fake-gcs-server has no owners)."""

    project = "mine"

    def __init__(self, lookup: BaseException | None, create: BaseException) -> None:
        self._lookup, self._create = lookup, create

    def bucket(self, name: str) -> Any:
        from google.cloud import storage

        return storage.Bucket(None, name)  # type: ignore[arg-type]

    def lookup_bucket(self, name: str, **_: Any) -> None:
        if self._lookup:
            raise self._lookup

    def create_bucket(self, *_: Any, **__: Any) -> None:
        raise self._create


def test_a_name_taken_by_another_project_says_so() -> None:
    taken = Bucket(_Refusing(None, gx.Conflict("not available")), "popular")  # type: ignore[arg-type]
    with pytest.raises(AlreadyExistsError) as info:
        taken.ensure("us-central1")
    assert "gs://popular is taken by another project" in str(info.value)
    assert "--bucket" in (info.value.hint or "")
    hidden = Bucket(_Refusing(gx.Forbidden("no access"), gx.Conflict("")), "theirs")  # type: ignore[arg-type]
    with pytest.raises(AccessDeniedError, match="exists but this account cannot use it"):
        hidden.ensure("us-central1")


def test_content_addressed_uploads_are_once_only(bucket, tmp_path: Path) -> None:
    files = []
    for i in range(12):
        f = tmp_path / f"f{i}"
        f.write_bytes(f"content {i}".encode())
        files.append((f"tpuctl/blobs/{i:04d}", f))
    done: list[str] = []
    assert bucket.upload_files(files, on_done=done.append) == 12
    assert sorted(done) == [name for name, _ in files]
    assert bucket.upload_files(files) == 0
    assert bucket.names("tpuctl/blobs/") == {name for name, _ in files}
    assert bucket.upload_if_absent("tpuctl/blobs/0000", files[0][1]) is False
    assert bucket.read_bytes("tpuctl/blobs/0003")[0] == b"content 3"


def test_json_with_generation_preconditions(bucket) -> None:
    gen = bucket.write_json(
        "tpuctl/jobs/j/status/worker-0.json", {"state": "RUNNING"}, if_generation_match=0
    )
    with pytest.raises(PreconditionFailedError):
        bucket.write_json(
            "tpuctl/jobs/j/status/worker-0.json", {"state": "X"}, if_generation_match=0
        )
    value, read_gen = bucket.read_json("tpuctl/jobs/j/status/worker-0.json")
    assert (value, read_gen) == ({"state": "RUNNING"}, gen)
    bucket.write_json(
        "tpuctl/jobs/j/status/worker-0.json", {"state": "DONE"}, if_generation_match=gen
    )
    with pytest.raises(PreconditionFailedError):  # a writer holding the old generation loses
        bucket.write_json(
            "tpuctl/jobs/j/status/worker-0.json", {"state": "LATE"}, if_generation_match=gen
        )
    with pytest.raises(NotFoundError):
        bucket.read_json("tpuctl/jobs/j/status/worker-9.json")


def test_update_json_retries_when_another_writer_gets_in(bucket) -> None:
    path = "tpuctl/jobs/j/control.json"
    calls = 0

    def change(value: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:  # someone else writes between our read and our write
            bucket.write_json(path, {"by": "other", "n": 1})
        base = value or {}
        return {**base, "n": base.get("n", 0) + 10}

    assert bucket.update_json(path, change) == {"by": "other", "n": 11}
    assert calls == 2


def test_a_range_read_reads_from_its_start_and_past_the_end_reads_nothing(bucket) -> None:
    bucket.upload_bytes("tpuctl/x.log", b"0123456789")
    before = bucket.received
    assert bucket.read_range("tpuctl/x.log", 0) == b"0123456789"
    assert bucket.read_range("tpuctl/x.log", 4) == b"456789"
    assert bucket.read_range("tpuctl/x.log", 10) == b""  # a 416: nothing new
    assert bucket.read_range("tpuctl/x.log", 3) == b"3456789"  # and the next read is served
    assert bucket.received - before == 10 + 6 + 7
    with pytest.raises(NotFoundError):
        bucket.read_range("tpuctl/none.log", 0)


def test_prefixes_and_download(bucket, tmp_path: Path) -> None:
    for job in ("20260101-000000-aaaaaa", "20260102-000000-bbbbbb"):
        bucket.upload_bytes(f"tpuctl/jobs/{job}/job.json", b"{}")
    bucket.upload_bytes("tpuctl/jobs/20260102-000000-bbbbbb/outputs/ckpt/step-1.npz", b"one")
    bucket.upload_bytes("tpuctl/jobs/20260102-000000-bbbbbb/outputs/loss.txt", b"0.5\n")
    assert bucket.list_prefixes("tpuctl/jobs/") == [
        "tpuctl/jobs/20260101-000000-aaaaaa/",
        "tpuctl/jobs/20260102-000000-bbbbbb/",
    ]
    name = "tpuctl/jobs/20260102-000000-bbbbbb/outputs/ckpt/step-1.npz"
    got = bucket.download_to(name, tmp_path / "out" / "ckpt" / "step-1.npz", 3)
    assert got.read_bytes() == b"one"  # its folders made
    with pytest.raises(NotFoundError):
        bucket.download_to("tpuctl/jobs/none/x", tmp_path / "none" / "x", 1)
    # more than was said, or less: no file
    for said in (2, 4):
        with pytest.raises(UnreadableObjectError, match=f"not the {said} expected"):
            bucket.download_to(name, tmp_path / "short", said)
        assert not (tmp_path / "short").exists()


def test_an_encoded_object_is_refused_and_never_decoded(bucket, tmp_path: Path) -> None:
    """A co-writer's gzip-encoded object (1 KB that decodes to 64 MiB) is read as its stored
    bytes, at most the bound of them, and refused naming it: nothing decodes it."""
    import gzip

    bomb = gzip.compress(b"{" * (64 << 20))
    blob = bucket._bucket.blob("tpuctl/jobs/j/status/worker-0.json")
    blob.content_encoding = "gzip"
    blob.upload_from_string(bomb, content_type="application/json")
    before = bucket.received
    with pytest.raises(UnreadableObjectError, match="worker-0.json is stored gzip-encoded"):
        bucket.read_json("tpuctl/jobs/j/status/worker-0.json")
    with pytest.raises(UnreadableObjectError, match="stored gzip-encoded"):
        bucket.read_range("tpuctl/jobs/j/status/worker-0.json", 0, 1 << 20)
    size = len(bomb)
    with pytest.raises(UnreadableObjectError, match="stored gzip-encoded"):
        bucket.download_to("tpuctl/jobs/j/status/worker-0.json", tmp_path / "x", size)
    assert not (tmp_path / "x").exists()
    assert bucket.received - before <= 3 * size  # the stored bytes, never the decoded ones


def test_missing_bucket_is_not_found(emulator, tmp_path: Path) -> None:
    absent = ClientFactory().bucket("never-made", "tpuctl-demo")
    with pytest.raises(NotFoundError, match="gs://never-made/x not found"):
        absent.upload_bytes("x", b"1")


def test_a_lifecycle_rule_is_added_beside_a_concurrent_change(
    emulator, bucket, monkeypatch
) -> None:
    """Another writer changes the bucket between our read and our write: the write is
    refused (its metageneration moved on), read again and made, keeping both changes."""
    other = emulator.storage_client().get_bucket(bucket.name)
    client = bucket._client
    real = client.get_bucket
    reads = 0

    def get_bucket(*args: Any, **kwargs: Any) -> Any:
        nonlocal reads
        reads += 1
        found = real(*args, **kwargs)
        if reads == 1:
            other.add_lifecycle_delete_rule(age=1, matches_prefix=["tmp/"])
            other.patch()
        return found

    monkeypatch.setattr(client, "get_bucket", get_bucket)
    bucket.add_delete_rule("tpuctl/jobs/", 30)
    assert reads == 2
    assert bucket.lifecycle_rules() == [
        {"action": {"type": "Delete"}, "condition": {"age": 1, "matchesPrefix": ["tmp/"]}},
        {"action": {"type": "Delete"}, "condition": {"age": 30, "matchesPrefix": ["tpuctl/jobs/"]}},
    ]
