"""Streaming whole files to and from the emulator's Cloud Storage (tpuctl/agent/streams.py):
sliced downloads, chunked resumable uploads, faults injected at the HTTP seam (`send`),
many files at once, and the memory bound measured in a process of its own."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import random
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.agent.conftest import AGENT_PYTHON, Cluster, install_bundle
from tpuctl.agent import metadata, net, streams, transfer
from tpuctl.agent.storage import Storage

KIB = 1024


class AnyToken(metadata.Token):
    """The emulator's Cloud Storage takes any token (or none)."""

    def headers(self, **extra: str) -> dict[str, str]:
        return dict(extra)


class Wire:
    """The HTTP seam (`net.send`) with a record of every request; `hook`, when set,
    answers in place of the network and may call `forward` (the real send)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, str]]] = []
        self.lock = threading.Lock()
        self.hook: Callable[..., net.Reply] | None = None

    def __call__(
        self, method: str, url: str, data: Any = None, headers: Any = None, timeout: float = 60
    ) -> net.Reply:
        headers = dict(headers or {})
        with self.lock:
            self.calls.append((method, url, headers))
        if self.hook is not None:
            return self.hook(method, url, data, headers, timeout)
        return net.send(method, url, data, headers, timeout)

    def ranges(self, method: str = "GET") -> list[str]:
        return [h.get("Range", "") for m, _, h in self.calls if m == method]

    def content_ranges(self) -> list[str]:
        return [h["Content-Range"] for m, _, h in self.calls if m == "PUT"]


class BreaksAfter:
    """A reply body that delivers `limit` bytes, then the connection is reset."""

    def __init__(self, stream: Any, limit: int) -> None:
        self.stream, self.left = stream, limit

    def read(self, size: int = -1) -> bytes:
        if self.left <= 0:
            raise ConnectionResetError("injected: connection reset mid-body")
        data = self.stream.read(min(size, self.left) if size >= 0 else self.left)
        self.left -= len(data)
        return bytes(data)

    def close(self) -> None:
        self.stream.close()


@pytest.fixture
def wire() -> Wire:
    return Wire()


@pytest.fixture
def storage(cluster: Cluster, wire: Wire) -> Storage:
    return Storage(AnyToken(), cluster.bucket.name, wire, url=cluster.storage_url)


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries here follow injected faults, not a loaded server: no waiting."""
    monkeypatch.setattr(streams, "backoff", lambda attempt: 0.0)


def random_bytes(size: int, seed: int = 1) -> bytes:
    return random.Random(seed).randbytes(size)


def md5(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data).digest()).decode()


SLICE = 64 * KIB


def test_a_sliced_download_reassembles_exactly(
    cluster: Cluster, storage: Storage, wire: Wire, tmp_path: Path
) -> None:
    data = random_bytes(5 * SLICE + 12345)
    generation = cluster.bucket.upload_bytes("ckpt/big.bin", data)
    target = tmp_path / "out" / "big.bin"
    with streams.Transfers(storage, threads=3, slice_size=SLICE) as t:
        t.download("ckpt/big.bin", target)
    assert hashlib.sha256(target.read_bytes()).digest() == hashlib.sha256(data).digest()
    # one GET for the first slice (and the object's size, generation and MD5), then
    # a ranged GET for each other slice, all of the generation the first one served
    starts = sorted(int(r.split("=")[1].split("-")[0]) for r in wire.ranges() if r)
    assert wire.ranges()[0] == "" and starts == [SLICE * k for k in range(1, 6)]
    assert all(f"generation={generation}" in url for _, url, _ in wire.calls[1:])
    assert not list(target.parent.glob("*.tpuctl-tmp"))


def test_a_small_object_is_one_get_checked_as_it_streams(
    cluster: Cluster, storage: Storage, wire: Wire, tmp_path: Path
) -> None:
    data = random_bytes(SLICE)
    cluster.bucket.upload_bytes("small.bin", data)
    cluster.bucket.upload_bytes("empty.bin", b"")
    digest = hashlib.sha256(data).hexdigest()
    with streams.Transfers(storage, slice_size=SLICE) as t:
        t.download("small.bin", tmp_path / "small.bin", sha256=digest)
        t.download("empty.bin", tmp_path / "empty.bin")
    assert (tmp_path / "small.bin").read_bytes() == data
    assert (tmp_path / "empty.bin").read_bytes() == b""
    assert wire.ranges() == ["", ""]


def test_a_broken_slice_is_asked_again_from_where_it_broke(
    cluster: Cluster, storage: Storage, wire: Wire, tmp_path: Path
) -> None:
    data = random_bytes(4 * SLICE + 999, seed=2)
    cluster.bucket.upload_bytes("ckpt/w.bin", data)
    broken = f"bytes={2 * SLICE}-{3 * SLICE - 1}"
    faults = {"reset": 1, "503": 1}

    def hook(method: str, url: str, data: Any, headers: dict[str, str], timeout: float) -> Any:
        reply = net.send(method, url, data, headers, timeout)
        if headers.get("Range") == broken and faults["reset"]:
            faults["reset"] -= 1
            reply.stream = BreaksAfter(reply.stream, 1000)  # the slice breaks at byte 1000
        elif headers.get("Range", "").startswith(f"bytes={3 * SLICE}-") and faults["503"]:
            faults["503"] -= 1
            reply.close()
            return net.Reply(503, {}, io.BytesIO(b"injected: busy"))
        return reply

    wire.hook = hook
    target = tmp_path / "w.bin"
    with streams.Transfers(storage, threads=2, slice_size=SLICE) as t:
        t.download("ckpt/w.bin", target)
    assert target.read_bytes() == data
    ranges = wire.ranges()
    assert ranges.count("") == 1  # the file was never started over
    assert f"bytes={2 * SLICE + 1000}-{3 * SLICE - 1}" in ranges  # from the byte it broke at
    assert ranges.count(f"bytes={3 * SLICE}-{4 * SLICE - 1}") == 2  # the 503, then again
    assert len(ranges) == 1 + 4 + 2


def test_a_download_that_does_not_match_its_md5_is_not_kept(
    cluster: Cluster, storage: Storage, wire: Wire, tmp_path: Path
) -> None:
    data = random_bytes(3 * SLICE, seed=3)
    cluster.bucket.upload_bytes("bad.bin", data)

    class Flipped(BreaksAfter):
        def read(self, size: int = -1) -> bytes:
            chunk = self.stream.read(size)
            return bytes([chunk[0] ^ 1]) + chunk[1:] if chunk else b""

    def hook(method: str, url: str, data: Any, headers: dict[str, str], timeout: float) -> Any:
        reply = net.send(method, url, data, headers, timeout)
        if headers.get("Range", "").startswith(f"bytes={SLICE}-"):
            reply.stream = Flipped(reply.stream, 0)
        return reply

    wire.hook = hook
    target = tmp_path / "dl" / "bad.bin"
    with (
        pytest.raises(net.HttpError, match="MD5"),
        streams.Transfers(storage, slice_size=SLICE) as t,
    ):
        t.download("bad.bin", target)
    assert not target.exists() and not list(target.parent.iterdir())


CHUNK = 256 * KIB  # the smallest chunk the API takes


def resumable(storage: Storage) -> streams.Transfers:
    return streams.Transfers(storage, threads=2, chunk_size=CHUNK, multipart_limit=0)


def test_a_resumable_upload_goes_on_from_the_persisted_offset(
    cluster: Cluster, storage: Storage, wire: Wire, tmp_path: Path
) -> None:
    """The third chunk reaches the server but its reply is lost: the session is asked
    what it holds and the upload goes on after the third chunk, sending nothing twice."""
    data = random_bytes(5 * CHUNK + 777, seed=4)
    path = tmp_path / "ckpt.bin"
    path.write_bytes(data)
    held = {"end": -1}  # what the session holds, as fake-gcs-server acknowledged it

    def hook(method: str, url: str, body: Any, headers: dict[str, str], timeout: float) -> Any:
        if method == "PUT" and headers.get("Content-Range", "").startswith("bytes */"):
            # a status query, answered as Cloud Storage answers it (fake-gcs-server would
            # finish the upload instead: see streams.py)
            assert body == b""
            return net.Reply(308, {"Range": f"bytes=0-{held['end']}"}, io.BytesIO())
        reply = net.send(method, url, body, headers, timeout)
        if method == "PUT" and reply.status == 308:
            held["end"] = int(reply.headers["range"].rsplit("-", 1)[1])
            if headers["Content-Range"].startswith(f"bytes {2 * CHUNK}-"):
                reply.close()
                raise ConnectionResetError("injected: the reply to the third chunk is lost")
        return reply

    wire.hook = hook
    obj = resumable(storage).upload_now("out/ckpt.bin", path)
    assert obj["md5Hash"] == md5(data) and int(obj["size"]) == len(data)
    assert cluster.bucket.read_bytes("out/ckpt.bin", 1 << 30)[0] == data
    size = len(data)
    assert wire.content_ranges() == [
        *(f"bytes {k * CHUNK}-{(k + 1) * CHUNK - 1}/{size}" for k in range(3)),
        f"bytes */{size}",
        *(f"bytes {k * CHUNK}-{min((k + 1) * CHUNK, size) - 1}/{size}" for k in range(3, 6)),
    ]


def test_an_upload_finished_early_by_the_emulator_starts_a_new_session(
    cluster: Cluster, storage: Storage, wire: Wire, tmp_path: Path
) -> None:
    """fake-gcs-server finishes an upload when asked for its status: the object's size
    tells, and the upload starts over in a new session."""
    data = random_bytes(3 * CHUNK + 5, seed=5)
    path = tmp_path / "ckpt.bin"
    path.write_bytes(data)
    lost = {"count": 1}

    def hook(method: str, url: str, body: Any, headers: dict[str, str], timeout: float) -> Any:
        reply = net.send(method, url, body, headers, timeout)
        if headers.get("Content-Range", "").startswith(f"bytes {CHUNK}-") and lost["count"]:
            lost["count"] -= 1
            reply.close()
            raise ConnectionResetError("injected")
        return reply

    wire.hook = hook
    resumable(storage).upload_now("out/ckpt.bin", path)
    assert cluster.bucket.read_bytes("out/ckpt.bin", 1 << 30)[0] == data
    assert [m for m, u, _ in wire.calls if m == "POST"] == ["POST", "POST"]  # two sessions


def test_many_small_files_upload_concurrently(
    cluster: Cluster, storage: Storage, wire: Wire, tmp_path: Path
) -> None:
    out = tmp_path / "outputs"
    for k in range(300):
        (out / f"d{k % 7}").mkdir(parents=True, exist_ok=True)
        (out / f"d{k % 7}" / f"f{k}.txt").write_text(f"file {k}\n")
    # the first 8 uploads wait for each other: one at a time, the barrier breaks
    together = threading.Barrier(8, timeout=20)
    seen = {"posts": 0}

    def hook(method: str, url: str, body: Any, headers: dict[str, str], timeout: float) -> Any:
        if method == "POST":
            with wire.lock:
                seen["posts"] += 1
                first = seen["posts"] <= 8
            if first:
                together.wait()
        return net.send(method, url, body, headers, timeout)

    wire.hook = hook
    sync = transfer.OutputSync(storage, out, "jobs/j/outputs/", threads=8)
    assert sync.sync() == 300
    names = {o.name for o in cluster.bucket.objects("jobs/j/outputs/")}
    assert len(names) == 300 and "jobs/j/outputs/d3/f10.txt" in names
    assert cluster.text("jobs/j/outputs/d3/f10.txt") == "file 10\n"
    assert sync.sync() == 0  # unchanged: nothing sent
    (out / "d0" / "f0.txt").write_text("changed\n")
    assert sync.sync() == 1


def test_restore_brings_back_every_file_and_refuses_unsafe_names(
    cluster: Cluster, storage: Storage, tmp_path: Path
) -> None:
    big = random_bytes(3 * SLICE + 1, seed=6)
    cluster.bucket.upload_bytes("jobs/j/outputs/ckpt/big.bin", big)
    for k in range(20):
        cluster.bucket.upload_bytes(f"jobs/j/outputs/small/{k}.txt", f"{k}\n".encode())
    out = tmp_path / "outputs"
    sync = transfer.OutputSync(storage, out, "jobs/j/outputs/", slice_size=SLICE)
    assert sync.restore() == 21
    assert (out / "ckpt" / "big.bin").read_bytes() == big
    assert (out / "small" / "7.txt").read_text() == "7\n"
    assert sync.sync() == 0  # what was restored is not sent back
    assert sync.restore() == 0  # what is there already is kept

    cluster.bucket.upload_bytes("jobs/k/outputs/a/../../escape.txt", b"x")
    with pytest.raises(ValueError, match="unsafe path"):
        transfer.OutputSync(storage, tmp_path / "k", "jobs/k/outputs/").restore()
    assert not (tmp_path / "escape.txt").exists()


def test_restore_fetches_the_newer_object_when_another_worker_replaced_it(
    cluster: Cluster, storage: Storage, tmp_path: Path
) -> None:
    """Workers of a slice share its outputs: one may replace an object between another's
    listing (which pins the generation) and its download (404 for that generation)."""
    cluster.bucket.upload_bytes("jobs/j/outputs/who.txt", b"worker 0\n")
    listed = storage.objects

    def objects_then_replaced(prefix: str) -> list[Any]:
        items = listed(prefix)
        if not replaced:
            replaced.append(True)
            cluster.bucket.upload_bytes("jobs/j/outputs/who.txt", b"worker 1\n")
        return items

    replaced: list[bool] = []
    storage.objects = objects_then_replaced  # type: ignore[method-assign]
    out = tmp_path / "outputs"
    assert transfer.OutputSync(storage, out, "jobs/j/outputs/").restore() == 1
    assert replaced and (out / "who.txt").read_text() == "worker 1\n"


MEMORY_PROBE = """
import json, os, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])  # the agent's bundle, as on a VM: no tpuctl here
from tpuctl_agent import metadata, transfer
from tpuctl_agent.storage import Storage

def hwm():
    for line in open("/proc/self/status"):
        if line.startswith(("VmHWM", "VmRSS")):
            yield line.split()[0], int(line.split()[1]) * 1024

class AnyToken(metadata.Token):
    def headers(self, **extra):
        return dict(extra)

url, bucket, work, size = sys.argv[2], sys.argv[3], Path(sys.argv[4]), int(sys.argv[5])
storage = Storage(AnyToken(), bucket, url=url)
out = work / "out"
out.mkdir()
with open(out / "ckpt.bin", "wb") as f:  # sparse-ish: data every 16 MiB, holes between
    f.truncate(size)
    for offset in range(0, size, 16 << 20):
        f.seek(offset)
        f.write(os.urandom(1 << 20))
before = dict(hwm())["VmHWM:"]
assert transfer.OutputSync(storage, out, "jobs/mem/outputs/").sync() == 1
back = work / "back"
transfer.OutputSync(storage, back, "jobs/mem/outputs/").restore()
peak = dict(hwm())["VmHWM:"]
same = (back / "ckpt.bin").stat().st_size == size
print(json.dumps({"before": before, "peak": peak, "same_size": same}))
"""


def test_memory_stays_bounded_whatever_the_file_size(cluster: Cluster, tmp_path: Path) -> None:
    """Sync and restore of a 300 MB file in a process of its own, running the agent's
    bundle: its peak RSS grows by well under 64 MB (8 threads x 1 MiB blocks)."""
    size = 300 << 20
    bundle = install_bundle(tmp_path / "home")
    done = subprocess.run(
        [AGENT_PYTHON, "-I", "-c", MEMORY_PROBE, str(bundle), cluster.storage_url,
         cluster.bucket.name, str(tmp_path), str(size)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["same_size"]
    growth = result["peak"] - result["before"]
    assert growth < 64 << 20, f"peak RSS grew by {growth / 2**20:.0f} MiB"
    (obj,) = cluster.bucket.objects("jobs/mem/outputs/")
    assert obj.size == size
    sent, back = tmp_path / "out" / "ckpt.bin", tmp_path / "back" / "ckpt.bin"
    with sent.open("rb") as a, back.open("rb") as b:
        assert (
            hashlib.file_digest(a, "sha256").digest() == hashlib.file_digest(b, "sha256").digest()
        )
    sent.unlink()
    back.unlink()
