"""`tpuctl doctor NODE`'s look at one worker, from the inside: one JSON line.

    python3 BUNDLE checkup [--gs gs://B/P]... [--bucket B] [--remove-stale-lockfile]
                           [--stop PID]... [--target KIND:NAME --worker K]

Standard library only, Python 3.8+ (it runs from the agent bundle, bundle.py, sent on
stdin like `idle check`: services/node_doctor/live.py). It reports
- `devices`: the TPU device files there (`/dev/accel*`, `/dev/vfio/*`, TPUCTL_TPU_DEVICES);
- `holders`: the processes holding one open: pid, user, command, start time, and whether
  they are busy: using the CPU now (two /proc samples 0.5 s apart), or, with `--target`
  (what the worker runs on, target.py), their worker's TensorCores working in Cloud
  Monitoring's newest point (a process waiting on its TPU uses little CPU);
- `lockfile`: libtpu's `/tmp/libtpu_lockfile`. libtpu creates it when it takes the TPU and
  deletes it when its process exits; a process that was killed or aborted leaves it, and
  the next one then refuses the TPU ("TPU in use") although no one holds it
  (https://github.com/jax-ml/jax/issues/10192). Stale: it exists and no process holds a
  TPU device or has the file open;
- `packages`: versions of the ML frameworks and libtpu, read with importlib.metadata;
- `storage`: for each gs:// path, whether the VM's service account may list it (and,
  for the job bucket, write to it), with Storage's status and message (a 403 says which
  permission or scope is missing);
- `disk` (`df -P -k` of /, /tmp and $HOME) and `memory` (/proc/meminfo).
`--remove-stale-lockfile` removes the lockfile only if it is still stale; `--stop PID`
sends SIGTERM (SIGKILL after 10 s) to a process only if it still holds a TPU device.
The repairs happen first, so the report is of the state after them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any
from urllib.parse import quote, urlencode

from . import target
from .idle import _in_scope, _owner, _read, device_paths
from .metadata import Token, identity
from .net import HttpError, Json, http
from .storage import STORAGE_URL

LOCKFILE = "/tmp/libtpu_lockfile"
PACKAGES = (
    "tensorflow",
    "tensorflow-cpu",
    "tf-nightly",
    "jax",
    "jaxlib",
    "torch",
    "torch-xla",
    "libtpu",
    "libtpu-nightly",
)
BUSY_CPU = 0.05  # a holder using more than 5% of a core is busy
# A holder waiting on its TPU uses little CPU: with --target, a holder is busy too when
# Cloud Monitoring's newest TensorCore idle_duration of this worker is under this.
ACTIVE_WITHIN = 120.0


def _scope() -> bytes:
    return os.environ.get("TPUCTL_IDLE_SCOPE", "").encode()


def _pids() -> list[str]:
    me = {str(os.getpid()), str(os.getppid())}
    scope = _scope()
    return [p for p in os.listdir("/proc") if p.isdigit() and p not in me and _in_scope(p, scope)]


def _open_files(pid: str) -> list[str]:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return []
    out = []
    for fd in fds:
        try:
            out.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue
    return out


def _cpu_ticks(pid: str) -> int | None:
    raw = _read(f"/proc/{pid}/stat")
    if not raw:
        return None
    fields = raw.rsplit(b")", 1)[-1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def _started(pid: str) -> float | None:
    raw, stat = _read(f"/proc/{pid}/stat"), _read("/proc/stat")
    if not raw or not stat:
        return None
    boot = [line for line in stat.splitlines() if line.startswith(b"btime ")]
    ticks = int(raw.rsplit(b")", 1)[-1].split()[19])
    return int(boot[0].split()[1]) + ticks / os.sysconf("SC_CLK_TCK") if boot else None


def holders() -> list[Json]:
    """The processes holding a TPU device open, busy or idle."""
    devices = set(device_paths())
    found: dict[str, Json] = {}
    for pid in _pids():
        held = [f for f in _open_files(pid) if f in devices]
        if not held:
            continue
        argv = (_read(f"/proc/{pid}/cmdline") or b"").rstrip(b"\0").split(b"\0")
        found[pid] = {
            "pid": int(pid),
            "user": _owner(pid),
            "command": " ".join(b" ".join(argv).decode(errors="replace").split())[:200],
            "devices": sorted(held),
            "started": _started(pid),
            "ticks": _cpu_ticks(pid),
        }
    if found:
        time.sleep(0.5)
        for pid, h in found.items():
            after = _cpu_ticks(pid)
            before = h.pop("ticks")
            used = (
                (after - before) / os.sysconf("SC_CLK_TCK") / 0.5
                if None not in (after, before)
                else 0.0
            )  # type: ignore[operator]
            h["cpu"] = round(used, 3)
            h["busy"] = used > BUSY_CPU
    return sorted(found.values(), key=lambda h: h["pid"])


def tensorcores(held: list[Json], given: target.Given, worker: int) -> None:
    """A holder idle by its CPU may be waiting on its TPU: the worker's TensorCore idle
    time from Cloud Monitoring (the idle watchdog's evidence, monitoring.py) decides.
    Each holder gets `tensorcore_idle` (seconds, None when Monitoring has no recent point
    or cannot be read) and is busy when its TensorCores worked within ACTIVE_WITHIN.
    Which series are this worker's is the target's to say (`given`, in this VM's project
    and zone: a `tpu_worker` of the node, or on Compute Engine this VM's)."""
    try:
        node = target.of(Token(), identity(), given)
        idle_for = node.tensorcore_idle(worker, time.time())
    except (HttpError, ValueError):
        idle_for = None
    for h in held:
        h["tensorcore_idle"] = None if idle_for is None else round(idle_for)
        if idle_for is not None and idle_for < ACTIVE_WITHIN:
            h["busy"] = True


def lockfile(held: list[Json]) -> Json:
    try:
        st = os.stat(LOCKFILE)
    except OSError:
        return {"path": LOCKFILE, "exists": False}
    openers = [int(p) for p in _pids() if LOCKFILE in _open_files(p)]
    owners = sorted(set(openers) | {h["pid"] for h in held})
    return {
        "path": LOCKFILE,
        "exists": True,
        "mtime": st.st_mtime,
        "uid": st.st_uid,
        "owners": owners,
        "stale": not owners,
    }


def packages() -> dict[str, Any]:
    try:
        import site
        from importlib import metadata
    except ImportError:  # Python < 3.8
        return {}
    # Where a job's `python3` looks (PYTHONPATH, its site-packages, the user's), which
    # the bundle's own -I -S leave off its sys.path (bundle.py): metadata is only read.
    path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    path += [*sys.path, *site.getsitepackages(), site.getusersitepackages()]
    found: dict[str, Any] = {}
    for name in PACKAGES:
        found[name] = next((d.version for d in metadata.distributions(name=name, path=path)), None)
    return found


def _split(url: str) -> tuple[str, str]:
    rest = url[len("gs://") :] if url.startswith("gs://") else url
    bucket, _, prefix = rest.partition("/")
    return bucket, prefix


def storage(paths: list[str], bucket: str | None) -> list[Json]:
    token = Token()
    results = []
    wanted = [(p, False) for p in paths] + ([(f"gs://{bucket}/tpuctl/", True)] if bucket else [])
    for url, write in wanted:
        name, prefix = _split(url)
        base = f"{STORAGE_URL}/storage/v1/b/{quote(name, safe='')}/o"
        result: Json = {"url": url, "write": write}
        try:
            query = urlencode({"prefix": prefix, "maxResults": "1"})
            body = http("GET", f"{base}?{query}", headers=token.headers(), attempts=2, timeout=20)[
                2
            ]
            result.update(status=200, found=bool(json.loads(body).get("items")))
            if write:
                upload = f"{STORAGE_URL}/upload/storage/v1/b/{quote(name, safe='')}/o"
                target = urlencode({"uploadType": "media", "name": "tpuctl/doctor/probe"})
                headers = token.headers(**{"Content-Type": "text/plain"})
                http(
                    "POST",
                    f"{upload}?{target}",
                    b"tpuctl doctor\n",
                    headers,
                    attempts=2,
                    timeout=20,
                )
        except HttpError as e:
            result.update(status=e.status, message=_said(e))
        results.append(result)
    return results


def _said(e: HttpError) -> str:
    """Storage's own message (a 403 names the permission or scope), on one line."""
    text = str(e).partition(": ")[2]
    with contextlib.suppress(ValueError, KeyError, TypeError):
        text = json.loads(text)["error"]["message"]
    return f"HTTP {e.status}: " + " ".join(str(text).split())[:300]


def disk() -> list[Json]:
    paths = ["/", "/tmp", os.environ.get("HOME") or "/root"]
    out = []
    try:
        done = subprocess.run(
            ["df", "-P", "-k", *paths], capture_output=True, text=True, timeout=20
        )
        for path, line in zip(paths, done.stdout.splitlines()[1:]):
            fields = line.split()
            size, avail = int(fields[1]) * 1024, int(fields[3]) * 1024
            out.append({"path": path, "size": size, "free": avail, "mount": fields[-1]})
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        for path in paths:
            st = os.statvfs(path)
            out.append(
                {"path": path, "size": st.f_blocks * st.f_frsize, "free": st.f_bavail * st.f_frsize}
            )
    return out


def memory() -> Json:
    info = {}
    for line in (_read("/proc/meminfo") or b"").decode().splitlines():
        key, _, value = line.partition(":")
        if key in ("MemTotal", "MemAvailable"):
            info[key] = int(value.split()[0]) * 1024
    return {"total": info.get("MemTotal"), "available": info.get("MemAvailable")}


def present_devices() -> list[str]:
    """The TPU device files that are there, each once: a path TPUCTL_TPU_DEVICES names
    may be gone, a file may show at two paths (a bind mount), and /dev/vfio/vfio is
    VFIO's container, no chip."""
    seen, found = set(), []
    for path in device_paths():
        if os.path.dirname(path) == "/dev/vfio" and not os.path.basename(path).isdigit():
            continue
        try:
            st = os.stat(path)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            found.append(path)
    return found


def _gone(pid: int) -> bool:
    """Exited: no such process, or a zombie its parent has not reaped yet."""
    raw = _read(f"/proc/{pid}/stat")
    return raw is None or raw.rsplit(b")", 1)[-1].split()[:1] == [b"Z"]


def stop(pid: int) -> str:
    """SIGTERM a process that still holds a TPU device; SIGKILL it after 10 s."""
    if not any(h["pid"] == pid for h in holders()):
        return f"pid {pid} holds no TPU device (any more): left alone"
    os.kill(pid, signal.SIGTERM)
    for _ in range(100):
        if _gone(pid):
            return f"stopped pid {pid} (SIGTERM)"
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
    return f"killed pid {pid} (SIGKILL, 10 s after SIGTERM)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="checkup", description=__doc__.split("\n")[0])
    parser.add_argument("--gs", action="append", default=[], help="a gs:// path to reach")
    parser.add_argument("--bucket", help="the job bucket (listed and written to)")
    parser.add_argument("--remove-stale-lockfile", action="store_true")
    parser.add_argument("--stop", type=int, action="append", default=[], help="a pid to stop")
    # with it, Cloud Monitoring says whether the TensorCores of a CPU-idle holder work
    target.add_arguments(parser, required=False)
    parser.add_argument("--worker", type=int, default=0, help="this worker's number")
    args = parser.parse_args(argv)
    fixed = []
    for pid in args.stop:
        try:
            fixed.append(stop(pid))
        except OSError as e:
            fixed.append(f"could not stop pid {pid}: {e}")
    if args.remove_stale_lockfile:
        lock = lockfile(holders())
        if lock.get("stale"):
            try:
                os.remove(LOCKFILE)
                fixed.append(f"removed the stale {LOCKFILE}")
            except OSError as e:
                fixed.append(f"could not remove {LOCKFILE}: {e}")
    held = holders()
    if args.target and any(not h["busy"] for h in held):
        tensorcores(held, args.target, args.worker)
    report: Json = {
        "devices": present_devices(),
        "holders": held,
        "lockfile": lockfile(held),
        "packages": packages(),
        "storage": storage(args.gs, args.bucket),
        "disk": disk(),
        "memory": memory(),
        "fixed": fixed,
        "user": os.environ.get("USER") or str(os.getuid()),
        "checked": time.time(),
    }
    print(json.dumps(report), flush=True)
    return 0
