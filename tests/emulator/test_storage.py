"""The emulator's Cloud Storage (fake-gcs-server) through google-cloud-storage."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from google.api_core import exceptions as gx

from tpuctl.emulator.control.client import EmulatorControl
from tpuctl.emulator.core.server import EmulatorServer


def test_bucket_create_and_generation_preconditions(emulator) -> None:
    client = emulator.storage_client()
    bucket = client.create_bucket("tpuctl-demo-tpuctl", location="us-central2")
    with pytest.raises(gx.Conflict):
        client.create_bucket("tpuctl-demo-tpuctl")

    blob = bucket.blob("tpuctl/blobs/abc")
    blob.upload_from_string(b"hello", if_generation_match=0)
    first = blob.generation
    with pytest.raises(gx.PreconditionFailed):
        bucket.blob("tpuctl/blobs/abc").upload_from_string(b"other", if_generation_match=0)
    with pytest.raises(gx.PreconditionFailed):
        bucket.blob("tpuctl/blobs/abc").upload_from_string(b"x", if_generation_match=first + 1)
    bucket.blob("tpuctl/blobs/abc").upload_from_string(b"new", if_generation_match=first)
    assert bucket.blob("tpuctl/blobs/abc").download_as_bytes() == b"new"
    with pytest.raises(gx.NotFound):
        bucket.blob("missing").download_as_bytes()


def test_a_bucket_is_where_its_insert_put_it(emulator) -> None:
    """Cloud Storage keeps the location a bucket is created in, uppercase; with none, US."""
    client = emulator.storage_client()
    client.create_bucket("west-bucket", location="us-west4")
    client.create_bucket("default-bucket")
    west = client.get_bucket("west-bucket")
    assert (west.location, west.location_type) == ("US-WEST4", "region")
    assert client.get_bucket("default-bucket").location == "US"
    listed = {b.name: b.location for b in client.list_buckets()}
    assert listed == {"west-bucket": "US-WEST4", "default-bucket": "US"}


def test_a_delete_honours_if_generation_match(emulator) -> None:
    """As Cloud Storage does (412 conditionNotMet); fake-gcs-server alone deletes any
    generation. A claim released with its generation never deletes a newer one."""
    bucket = emulator.storage_client().create_bucket("tpuctl-demo-tpuctl")
    blob = bucket.blob("tpuctl/nodes/claim.json")
    blob.upload_from_string(b"mine")
    mine = blob.generation
    blob.upload_from_string(b"theirs", if_generation_match=mine)
    with pytest.raises(gx.PreconditionFailed):
        bucket.blob("tpuctl/nodes/claim.json").delete(if_generation_match=mine)
    assert bucket.blob("tpuctl/nodes/claim.json").download_as_bytes() == b"theirs"
    bucket.blob("tpuctl/nodes/claim.json").delete(if_generation_match=blob.generation)
    assert not bucket.blob("tpuctl/nodes/claim.json").exists()


def test_listing_pages_and_prefixes(emulator) -> None:
    client = emulator.storage_client()
    bucket = client.create_bucket("pages")
    for i in range(23):
        bucket.blob(f"tpuctl/jobs/j{i:02d}/job.json").upload_from_string(b"{}")
    bucket.blob("tpuctl/blobs/x").upload_from_string(b"x")
    pages = list(client.list_blobs("pages", prefix="tpuctl/jobs/", page_size=10).pages)
    assert [p.num_items for p in pages] == [10, 10, 3]
    listing = client.list_blobs("pages", prefix="tpuctl/jobs/", delimiter="/", page_size=10)
    assert list(listing) == []
    assert len(listing.prefixes) == 23 and "tpuctl/jobs/j07/" in listing.prefixes


def test_a_listed_objects_links_name_the_proxy(emulator) -> None:
    """Cloud Storage's metadata names an object's links at its own address; the emulator's
    at the proxy's, the only way in (the backend has a network of its own): a client
    downloads a listed blob by its mediaLink."""
    client = emulator.storage_client()
    client.create_bucket("links")
    client.bucket("links").blob("a/x.json").upload_from_string(b'{"a": 1}')
    proxy = emulator.status()["storage_endpoint"]
    (listed,) = client.list_blobs("links", prefix="a/")
    assert listed.media_link.startswith(proxy + "/") and listed.self_link.startswith(proxy)
    assert listed.download_as_bytes() == b'{"a": 1}'  # byte for byte: media is not rewritten


def test_resumable_upload_round_trips(emulator) -> None:
    bucket = emulator.storage_client().create_bucket("big")
    data = os.urandom(3 * 256 * 1024 + 17)
    bucket.blob("big.bin", chunk_size=256 * 1024).upload_from_string(data)
    assert bucket.blob("big.bin").download_as_bytes() == data


def test_reset_empties_storage(emulator) -> None:
    client = emulator.storage_client()
    for name in ("one", "two"):
        client.create_bucket(name).blob("a/b").upload_from_string(b"x")
    emulator.reset()
    assert list(client.list_buckets()) == []


def test_reset_empties_a_bucket_that_a_late_write_refilled(
    emulator, emulator_server: EmulatorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A worker's upload that was under way lands after the objects were swept, before
    # the bucket's delete: the bucket is emptied again rather than the reset failing.
    client = emulator.storage_client()
    bucket = client.create_bucket("busy")
    bucket.blob("first").upload_from_string(b"x")
    storage = emulator_server.fronts["storage"]
    call = storage._call
    late = []

    def racing(method: str, path: str):
        if method == "DELETE" and path == "/storage/v1/b/busy" and not late:
            late.append(path)  # straight to fake-gcs-server: the proxy waits on the lock
            conn = storage.connection(10)
            try:
                conn.request("POST", "/upload/storage/v1/b/busy/o?uploadType=media&name=late", b"y")
                assert conn.getresponse().status == 200
            finally:
                conn.close()
        return call(method, path)

    monkeypatch.setattr(storage, "_call", racing)
    emulator.reset()
    assert late and list(client.list_buckets()) == []


def test_objects_outlive_a_restart_with_a_state_dir(tmp_path: Path) -> None:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    def client(server: EmulatorServer) -> storage.Client:
        endpoint = server.backend.storage_endpoint
        return storage.Client(
            "p", AnonymousCredentials(), client_options={"api_endpoint": endpoint}
        )

    with EmulatorServer(port=0, state_dir=tmp_path) as first:
        client(first).create_bucket("kept").blob("o").upload_from_string(b"still here")
    with EmulatorServer(port=0, state_dir=tmp_path) as second:
        assert client(second).bucket("kept").blob("o").download_as_bytes() == b"still here"


def test_server_without_storage_says_so() -> None:
    with EmulatorServer(port=0, storage=False) as server:
        assert EmulatorControl(server.address).status()["storage_endpoint"] is None


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:  # a thread may end between the listing and the read
            out += [int(c) for c in (task / "children").read_text().split()]
        except FileNotFoundError:
            continue
    return out


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def _wait_gone(pid: int) -> bool:
    deadline = time.monotonic() + 20  # a bound on a hang, not a measurement
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return _gone(pid)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_storage_child_dies_with_the_emulator(sig: signal.Signals) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tpuctl.emulator", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        address = proc.stdout.readline().strip().split("=", 1)[1]
        endpoint = EmulatorControl(address).status()["storage_endpoint"]
        # fake-gcs-server, under the helper that keeps it on a network of its own
        [helper] = _children(proc.pid)
        [server] = _children(helper)
        assert "private_net" in Path(f"/proc/{helper}/cmdline").read_text()
        assert "fake-gcs-server" in Path(f"/proc/{server}/cmdline").read_text()
        # the endpoint is the emulator's proxy in front of the child (storage/proxy.py)
        with urllib.request.urlopen(f"{endpoint}/storage/v1/b", timeout=10) as response:
            assert json.loads(response.read())["kind"] == "storage#buckets"
        proc.send_signal(sig)
        assert proc.wait(timeout=20) == (0 if sig == signal.SIGTERM else -signal.SIGKILL)
        assert _wait_gone(helper) and _wait_gone(server)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
