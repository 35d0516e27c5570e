"""The bucket is hostile: for each kind of object tpuctl reads on the laptop, hostile
variants planted as another principal with write access could plant them (a gzip bomb,
a size past any tpuctl writes, wrong JSON types, terminal controls, names that climb out,
huge counts), and every command that reads that kind run as a real process. Each must
end with no traceback, at most ~100 MB of memory, nothing written outside its target
folder, and one line naming the object.

READERS is the table of the modules that read the bucket and the kinds each reads;
`test_every_bucket_read_goes_through_the_one_reader` fails when a module reads the bucket
without being in it, or when anything reads an object except through the one download of
cloud/object_reads.py (`Reads._download`): a new reader is hostile-tested or the suite fails.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import pytest

from tpuctl.agent import protocol
from tpuctl.cloud.clients import ClientFactory
from tpuctl.cloud.storage import Bucket
from tpuctl.services import staging

ROOT = Path(__file__).resolve().parents[2] / "tpuctl"
MOST_RSS_MB = 100
MiB = 1 << 20

# Every laptop module that reads the bucket (a call of read_json, read_bytes, read_range or
# download_to), and the kinds of object it reads; each kind is planted below.
READERS: dict[str, set[str]] = {
    "services/records.py": {"status", "cancel", "receipt", "marks", "record"},
    "services/jobs.py": {"log"},
    "services/run/vouching.py": {"vouched"},
    "services/outputs.py": {"manifest", "output"},
    "services/profile.py": {"trace"},
    "services/run/agents.py": {"status"},
    "services/run/lease.py": {"lease"},
}
# Kinds whose readers run inside `tpuctl run` or `profile` against a live job: hostile
# variants of them are covered where those commands are tested (the declared sizes of
# traces: tests/cli/test_profile.py; leases: tests/cli/test_run_lease.py; the environments
# a client vouched for: tests/cli/test_run_job_keys.py), and the bounds they share with
# every kind here are cloud/storage.py's.
LIVE_ONLY = {"trace", "lease", "vouched"}
READ_CALLS = {"read_json", "read_bytes", "read_range", "download_to"}
# what the Google storage client reads objects with: only the one reader may call them
CLIENT_READS = {
    "download_to_file",
    "download_as_bytes",
    "download_as_string",
    "download_as_text",
    "download_to_filename",
    "open",
}


def _calls(path: Path, names: set[str], receiver: str = "") -> list[tuple[str, int]]:
    """The calls `X.name(...)` in a module, `name` in `names` and X's text holding
    `receiver` (any X when empty)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        (node.func.attr, node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in names
        and receiver in ast.unparse(node.func.value).lower()
    ]


def _laptop_modules() -> list[Path]:
    return [
        p
        for p in sorted(ROOT.rglob("*.py"))
        if p.relative_to(ROOT).parts[0] not in {"agent", "emulator"}
    ]


def test_every_bucket_read_goes_through_the_one_reader() -> None:
    readers = set()
    for path in _laptop_modules():
        rel = path.relative_to(ROOT).as_posix()
        if rel in ("cloud/storage.py", "cloud/object_reads.py"):
            continue
        if _calls(path, READ_CALLS, "bucket"):  # a local file's read_bytes is no bucket read
            readers.add(rel)
        client = _calls(path, CLIENT_READS - {"open"}) + _calls(path, {"open"}, "blob")
        assert not client, f"{rel} reads objects with the storage client itself: {client}"
    assert readers == set(READERS), (
        "a module reads the bucket but is not in READERS (add it, and plant its kinds), "
        f"or one in READERS no longer does: {sorted(readers ^ set(READERS))}"
    )
    # in the one reader, the client's download is called in one place, raw
    reader = ROOT / "cloud" / "object_reads.py"
    downloads = _calls(reader, CLIENT_READS - {"open"}) + _calls(reader, {"open"}, "blob")
    assert [name for name, _ in downloads] == ["download_to_file"], downloads
    assert "raw_download=True" in reader.read_text()
    storage = ROOT / "cloud" / "storage.py"
    assert not _calls(storage, CLIENT_READS - {"open"}) + _calls(storage, {"open"}, "blob")
    planted = {kind for kinds in READERS.values() for kind in kinds}
    assert planted - LIVE_ONLY <= set(PLANTERS), sorted(planted - LIVE_ONLY - set(PLANTERS))


# -- the hostile objects -----------------------------------------------------------------


@pytest.fixture(scope="module")
def bomb() -> bytes:
    """About 1 MiB of gzip that decodes to 1 GiB."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: the gzip format
    zeros = bytes(MiB)
    data = b"".join(z.compress(zeros) for _ in range(1024)) + z.flush()
    assert len(data) < 2 * MiB
    return data


@dataclass
class Planted:
    job: str
    name: str  # the object's path in the bucket
    kind: str
    variant: str


def _put(bucket: Bucket, name: str, data: bytes, encoding: str | None = None) -> None:
    """Write as another principal would: any bytes, any Content-Encoding."""
    client = ClientFactory().storage_client("tpuctl-demo")
    blob = client.bucket(bucket.name).blob(name)
    if encoding:
        blob.content_encoding = encoding
    blob.upload_from_string(data, content_type="application/json")


def _job(bucket: Bucket, *, record: bytes | None = None, status: bytes | None = None) -> str:
    job = staging.new_job_id()
    default = {"id": job, "name": f"victim-{job[-6:]}", "workers": 1, "zone": "us-central1-a"}
    _put(bucket, protocol.job_record_path(job), record or json.dumps(default).encode())
    log = protocol.log_path(job, 1, 0)
    ok = {"worker": 0, "attempt": 1, "state": "SUCCEEDED", "log": log, "exit_status": 0}
    _put(bucket, protocol.status_path(job, 0), status or json.dumps(ok).encode())
    _put(bucket, log, b"hello from the job\n")
    return job


CONTROLS = "\x1b]0;pwned\x07\x1b[2J\u202etxt.exe"
WRONG_TYPES = {"worker": 0, "attempt": 1, "state": "RUNNING", "ended": "x", "started": []}


def _plant_record(bucket: Bucket, bomb: bytes) -> list[Planted]:
    out = []
    for variant, data, enc in (
        ("gzip bomb", bomb, "gzip"),
        ("wrong types", json.dumps({"id": 5, "name": ["x"], "created_unix": "x"}).encode(), None),
        ("controls", json.dumps({"id": "x", "name": CONTROLS, "node": CONTROLS}).encode(), None),
        ("too large", b'{"id": "' + b"x" * (2 * MiB) + b'"}', None),
        ("huge counts", b'{"id": "x", "n": [' + b"[]," * 340_000 + b"[]]}", None),
    ):
        job = staging.new_job_id()
        _put(bucket, protocol.job_record_path(job), data, enc)
        _put(bucket, protocol.status_path(job, 0), b'{"worker": 0, "state": "RUNNING"}')
        out.append(Planted(job, protocol.job_record_path(job), "record", variant))
    return out


def _plant_status(bucket: Bucket, bomb: bytes) -> list[Planted]:
    out = []
    for variant, data, enc in (
        ("gzip bomb", bomb, "gzip"),
        ("wrong types", json.dumps(WRONG_TYPES).encode(), None),
        ("not an object", b"[1, 2, 3]", None),
        ("nested deep", b"[" * 100_000 + b"]" * 100_000, None),
    ):
        job = _job(bucket, status=data if enc is None else b"{}")
        if enc:
            _put(bucket, protocol.status_path(job, 0), data, enc)
        out.append(Planted(job, protocol.status_path(job, 0), "status", variant))
    # huge counts: a status object under a thousand workers' names for a 1-worker job
    job = _job(bucket)
    for w in range(1, 300):
        _put(bucket, protocol.status_path(job, w), b'{"worker": 0, "state": "FAILED"}')
    # controls in what `jobs JOB` prints of a status: its environment line
    env = {"key": CONTROLS, "how": CONTROLS, "packages": [CONTROLS], "seconds": "x"}
    job = _job(
        bucket,
        status=json.dumps(
            {**WRONG_TYPES, "ended": 1.0, "started": 0.5, "environment": env}
        ).encode(),
    )
    out.append(Planted(job, protocol.status_path(job, 0), "status", "controls"))
    return out


def _plant_cancel(bucket: Bucket, bomb: bytes) -> list[Planted]:
    job = staging.new_job_id()  # no agent reported: its state is its cancel mark's
    record = {"id": job, "name": "cancelled", "workers": 1}
    _put(bucket, protocol.job_record_path(job), json.dumps(record).encode())
    _put(bucket, protocol.cancel_path(job), bomb, "gzip")
    return [Planted(job, protocol.cancel_path(job), "cancel", "gzip bomb")]


def _plant_log(bucket: Bucket, bomb: bytes) -> list[Planted]:
    job = _job(bucket)
    _put(bucket, protocol.log_path(job, 1, 0), bomb, "gzip")
    return [Planted(job, protocol.log_path(job, 1, 0), "log", "gzip bomb")]


def _plant_receipt(bucket: Bucket, bomb: bytes) -> list[Planted]:
    out = []
    for kind, name in (("receipt", "receipt.json"), ("marks", "marks.json")):
        job = _job(bucket)
        _put(bucket, protocol.job_path(job, name), bomb, "gzip")
        out.append(Planted(job, protocol.job_path(job, name), kind, "gzip bomb"))
        job = _job(bucket)
        _put(bucket, protocol.job_path(job, name), b'{"version": 1, "seconds": "x"}')
        out.append(Planted(job, protocol.job_path(job, name), kind, "wrong types"))
    return out


def _plant_outputs(bucket: Bucket, bomb: bytes) -> list[Planted]:
    job = _job(bucket)
    out = []
    bad = protocol.job_path(job, "manifests", "slice-0", "worker-0.json")
    _put(bucket, bad, bomb, "gzip")
    out.append(Planted(job, bad, "manifest", "gzip bomb"))
    deep = protocol.job_path(job, "manifests", "slice-0", "worker-1.json")
    _put(bucket, deep, b'{"files": {' + b'"a":0,' * 1_300_000 + b'"b":0}}')
    out.append(Planted(job, deep, "manifest", "huge counts"))
    name = protocol.outputs_prefix(job) + "ckpt.bin"
    _put(bucket, name, bomb, "gzip")
    out.append(Planted(job, name, "output", "gzip bomb"))
    for climbing in ("../../../escaped.txt", "/etc/escaped.txt", "a/../../escaped.txt"):
        _put(bucket, protocol.outputs_prefix(job) + climbing, b"climbed out")
    return out


PLANTERS = {
    "record": _plant_record,
    "status": _plant_status,
    "cancel": _plant_cancel,
    "log": _plant_log,
    "receipt": _plant_receipt,
    "marks": _plant_receipt,
    "manifest": _plant_outputs,
    "output": _plant_outputs,
}


# -- the commands ----------------------------------------------------------------------


@dataclass
class Ran:
    code: int
    out: str
    err: str
    rss_mb: float


# A process's peak memory as the kernel counts it for its own program: VmHWM, read as it
# exits (getrusage's and wait4's ru_maxrss also count what the process had before its
# exec, here a fork of pytest's, whatever tpuctl itself used).
PEAK = """\
import atexit, runpy, sys
def _peak(path=sys.argv[1]):
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            open(path, "w").write(line.split()[1])
atexit.register(_peak)
sys.argv = ["tpuctl", *sys.argv[2:]]
runpy.run_module("tpuctl", run_name="__main__", alter_sys=True)
"""


def _tpuctl(*args: str, cwd: Path) -> Ran:
    """A real tpuctl process, with its peak memory (kB in `PEAK`'s file)."""
    with tempfile.TemporaryDirectory() as tmp:
        peak = Path(tmp) / "peak"
        r = subprocess.run(
            [sys.executable, "-c", PEAK, str(peak), *args],
            cwd=cwd,
            capture_output=True,
            env=dict(os.environ, COLUMNS="120"),
            timeout=300,
        )
        return Ran(r.returncode, r.stdout.decode(), r.stderr.decode(), int(peak.read_text()) / 1024)


@pytest.fixture
def bucket(emulator) -> Bucket:  # noqa: ANN001
    b = ClientFactory().bucket(staging.default_bucket_name("tpuctl-demo"), "tpuctl-demo")
    b.ensure("us-central1")
    return b


def _snapshot(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


@pytest.mark.long
def test_a_hostile_bucket_breaks_no_command(
    bucket: Bucket, bomb: bytes, isolated_env: Path
) -> None:
    planted: list[Planted] = []
    for planter in dict.fromkeys(PLANTERS.values()):
        planted += planter(bucket, bomb)
    work = isolated_env / "work"
    before = _snapshot(isolated_env)
    runs: list[tuple[tuple[str, ...], Ran, list[Planted]]] = []
    everything = ("jobs", "--project", "tpuctl-demo")
    runs.append((everything, _tpuctl(*everything, cwd=work), planted))
    # `cost` reads every record, status, receipt and marks: it must not break or show a
    # control (which objects it reaches depends on what the records say: none named here)
    spent = ("cost", "--all-owners", "--since", "365d", "--json", "--project", "tpuctl-demo")
    runs.append((spent, _tpuctl(*spent, cwd=work), []))
    for job in dict.fromkeys(p.job for p in planted):
        mine = [p for p in planted if p.job == job]
        kinds = {p.kind for p in mine}
        commands: list[tuple[str, ...]] = [("jobs", job)]
        if kinds & {"log", "status"}:
            commands.append(("logs", job))
        if kinds & {"manifest", "output"}:
            commands.append(("outputs", job, "out"))
            commands.append(("outputs", job, "out-unverified", "--unverified"))
        for args in commands:
            full = (*args, "--project", "tpuctl-demo")
            runs.append((full, _tpuctl(*full, cwd=work), mine))
    for args, ran, mine in runs:
        said = f"tpuctl {' '.join(args)} -> {ran.code}\n{ran.err[-3000:]}"
        assert "Traceback" not in ran.err and "unexpected" not in ran.err, said
        assert ran.rss_mb < MOST_RSS_MB, f"{ran.rss_mb:.0f} MB: {said}"
        assert "\x1b" not in ran.out + ran.err and "\u202e" not in ran.out + ran.err, said
        if args[0] == "cost":  # every job it could read summed, the others skipped
            assert ran.code == 0 and "total" in json.loads(ran.out), said
        for p in mine:
            if args[0] == "jobs" and len(args) > 3 and p.kind in {"manifest", "output", "log"}:
                continue  # `jobs JOB` reads no output, manifest or log
            if args[0] == "jobs" and len(args) == 3 and p.kind not in {"record", "status"}:
                continue  # the listing reads records and statuses (receipts: `jobs JOB`)
            if p.variant == "controls":
                continue  # read as it is, and shown escaped (asserted above)
            if args[0] == "outputs" and p.kind not in {"manifest", "output"}:
                continue
            if args[0] == "outputs" and p.kind == "manifest" and "--unverified" in args:
                continue  # no manifest is read when nothing is verified
            if args[0] == "outputs" and p.kind == "output" and "--unverified" not in args:
                continue  # named by no manifest: left there, said by count
            if args[0] == "logs" and p.kind not in {"log", "status"}:
                continue
            lines = [ln for ln in ran.err.splitlines() if p.name in ln]
            assert len(lines) == 1, f"{p.kind} {p.variant} ({p.name}) not named once: {said}"
    # nothing outside the folders the commands were given
    made = _snapshot(isolated_env) - before
    allowed = (work / "out", work / "out-unverified", isolated_env / "state", isolated_env / "home")
    outside = [p for p in made if not any(p.is_relative_to(a) for a in allowed)]
    assert not outside, outside
    assert not list(isolated_env.rglob("escaped.txt")) or all(
        p.is_relative_to(work / "out-unverified") for p in isolated_env.rglob("escaped.txt")
    )
