"""`tpuctl doctor NODE`'s verdicts: each check of the troubleshooting chain as a `Check`
(pass, warn, fail or skip, with its evidence and the fix), from the node as the API
describes it and from what each worker's `checkup` (tpuctl/agent/checkup.py) reported.

Pure functions of their inputs: live.py gathers the inputs."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from tpuctl import frameworks, wording
from tpuctl.agent import protocol
from tpuctl.models import Node

Status = Literal["pass", "warn", "fail", "skip"]
STATUSES: tuple[Status, ...] = ("fail", "warn", "pass", "skip")
DISK_FAIL, DISK_WARN = 0.05, 0.10  # free fraction of a file system
DISK_FAIL_BYTES = 1 << 30  # and less than 1 GiB free fails whatever the size
MEMORY_WARN = 0.05


@dataclass
class Check:
    """One link of the chain. `check` is its id (docs/doctor.md lists them)."""

    check: str
    status: Status
    summary: str
    evidence: list[str] = field(default_factory=list)
    fix: str = ""
    worker: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def node_state(node: Node) -> Check:
    evidence = [f"state {node.state}, health {node.health or 'unset'}"]
    if node.health_description:
        evidence.append(f"healthDescription: {node.health_description}")
    for s in node.symptoms:
        worker = f" on worker {s.worker}" if s.worker else ""
        evidence.append(f"symptom {s.kind}{worker}: {s.details}".rstrip(": "))
    if node.maintenance:
        evidence.append(f"upcoming maintenance: {node.maintenance.summary()}")
    name = node.name
    if node.state == "PREEMPTED":
        return Check(
            "node-state",
            "fail",
            "the node was preempted",
            evidence,
            f"a preempted node cannot be restarted: `tpuctl delete {name}` and create "
            "it again (or use `tpuctl run --restarts`)",
        )
    if node.state in ("STOPPED", "STOPPING"):
        return Check(
            "node-state", "fail", f"the node is {node.state}", evidence, f"`tpuctl start {name}`"
        )
    if node.state != "READY":
        return Check(
            "node-state",
            "fail",
            f"the node is {node.state}, not READY",
            evidence,
            f"wait until it is READY (`tpuctl describe {name}`); if it stays "
            f"{node.state}, delete it and create it again",
        )
    if node.health == "UNHEALTHY_MAINTENANCE":
        return Check(
            "node-state",
            "fail",
            "the node is under maintenance",
            evidence,
            "wait for the maintenance to end, or move the job elsewhere",
        )
    if node.health not in ("", "HEALTHY"):
        return Check(
            "node-state",
            "fail",
            f"the node is unhealthy ({node.health})",
            evidence,
            f"the TPU runtime of the node is unwell: `tpuctl delete {name}` and "
            "create it again (a restart may not clear it)",
        )
    if node.symptoms or node.maintenance:
        return Check(
            "node-state",
            "warn",
            "READY, with symptoms or maintenance ahead",
            evidence,
            "read the symptoms above; OUT_OF_MEMORY / HBM_OUT_OF_MEMORY want a "
            "smaller batch or model per chip",
        )
    return Check("node-state", "pass", "READY and HEALTHY", evidence)


def device_files(node: Node | None) -> str:
    """Where a TPU VM shows its chips: /dev/accel* on v2, v3 and v4, VFIO groups
    /dev/vfio/* from v5e on (the agent's preflight looks for the same)."""
    generation = node.slice.generation if node is not None else ""
    if generation in ("v2", "v3", "v4"):
        return "/dev/accel*"
    return "/dev/vfio/*" if generation else "/dev/accel* or /dev/vfio/*"


def devices(worker: int, report: dict[str, Any], node: Node | None = None) -> Check:
    found = report.get("devices") or []
    if not found:
        wanted = device_files(node)
        name = node.name if node else "NODE"
        return Check(
            "tpu-devices",
            "fail",
            f"no TPU device files ({wanted}) on the worker",
            [f"none of {wanted} is there"],
            "the VM sees no TPU chip, as after a stop/start that did not bring them back: "
            f"`tpuctl delete {name}` and create it again (a `tpuctl stop {name}` and "
            f"`tpuctl start {name}` may bring them back); `tpuctl run` ends a job on "
            "this worker as a TPU failure and replaces the node",
            worker,
        )
    return Check("tpu-devices", "pass", f"{len(found)} TPU device(s)", found[:8], "", worker)


def lockfile(worker: int, report: dict[str, Any], fixed: list[str]) -> Check:
    lock = report.get("lockfile") or {}
    done = [f for f in fixed if "lockfile" in f]
    if not lock.get("exists"):
        return Check(
            "libtpu-lockfile",
            "pass",
            "no libtpu lockfile" if not done else done[0],
            done,
            "",
            worker,
        )
    since = _ago(lock.get("mtime"))
    if lock.get("stale"):
        return Check(
            "libtpu-lockfile",
            "fail",
            f"a stale {lock['path']} (from {since}): its owner is gone",
            [f"{lock['path']} exists; no process holds a TPU device or the file", *done],
            "the next job would be told the TPU is in use: `tpuctl run` removes it "
            "before its job starts; `tpuctl doctor NODE --fix` removes it now (or "
            f"`tpuctl exec NODE -- sudo rm {lock['path']}`)",
            worker,
        )
    owners = ", ".join(f"pid {p}" for p in lock.get("owners") or [])
    return Check(
        "libtpu-lockfile",
        "pass",
        f"{lock['path']} is held by {owners}",
        [f"created {since}"],
        "",
        worker,
    )


def _tensorcores(holder: dict[str, Any]) -> str:
    """What Cloud Monitoring said of the worker's TensorCores, when it was asked."""
    if "tensorcore_idle" not in holder:
        return ""
    seconds = holder["tensorcore_idle"]
    if seconds is None:
        return "; TensorCores: no recent Monitoring point"
    return f"; TensorCores idle for {seconds}s"


def holders(worker: int, report: dict[str, Any], fixed: list[str]) -> Check:
    held = report.get("holders") or []
    done = [f for f in fixed if f.startswith(("stopped", "killed", "could not stop", "pid"))]
    if not held:
        return Check("tpu-holder", "pass", "no process holds the TPU", done, "", worker)
    evidence = [
        f"pid {h['pid']} ({h['command'][:60]}) of {h['user']}, since {_ago(h.get('started'))}, "
        f"{'busy' if h.get('busy') else 'idle'} ({h.get('cpu', 0):.0%} CPU{_tensorcores(h)}), "
        f"holds {', '.join(h['devices'])}"
        for h in held
    ]
    idle = [h for h in held if not h.get("busy")]
    status: Status = "fail" if idle else "warn"
    summary = f"{len(held)} process(es) hold the TPU" + (f", {len(idle)} idle" if idle else "")
    fix = (
        "a job on this node cannot take the TPU while they run: stop them "
        "(`tpuctl doctor NODE --fix` asks first; --yes agrees)"
    )
    return Check("tpu-holder", status, summary, evidence + done, fix, worker)


def framework_versions(worker: int, report: dict[str, Any], runtime: str) -> Check:
    packages = {k: v for k, v in (report.get("packages") or {}).items() if v}
    evidence = [f"{k} {v}" for k, v in sorted(packages.items())] or ["no ML framework installed"]
    carried = frameworks.carried(runtime)
    for name, version in carried.items():
        dist = {"torch_xla": "torch-xla"}.get(name, name)
        have = packages.get(dist)
        if have is None:
            return Check(
                "framework",
                "fail",
                f"{runtime} carries {dist} {version}, but it is not installed",
                evidence,
                f"reinstall it (pip install {dist}=={version}) or recreate "
                "the node: something removed the image's framework",
                worker,
            )
        if not frameworks.matches(version, have):
            return Check(
                "framework",
                "fail",
                f"{runtime} carries {dist} {version}, but {have} is installed",
                evidence,
                f"pip install {dist}=={version} (the image's libtpu fits "
                "its own version), or a runtime version that carries "
                f"{have}",
                worker,
            )
    if packages.get("jax") and not (packages.get("libtpu") or packages.get("libtpu-nightly")):
        return Check(
            "framework",
            "fail",
            "jax is installed without libtpu: it runs on the CPU",
            evidence,
            f"--setup '{frameworks.SETUP['jax']}'",
            worker,
        )
    # a Compute Engine TPU VM has no runtime version: its image pins no framework
    fits = f"fits {runtime}" if runtime else "installed (the VM's image pins no framework)"
    return Check("framework", "pass", fits, evidence, "", worker)


def storage(worker: int, report: dict[str, Any]) -> list[Check]:
    out = []
    for r in report.get("storage") or []:
        url, status = r["url"], r.get("status")
        what = "write to" if r.get("write") else "read"
        if status == 200:
            prefix = url[len("gs://") :].partition("/")[2]
            if not r.get("write") and prefix and not r.get("found"):
                out.append(
                    Check(
                        "storage",
                        "warn",
                        f"{url}: reachable, but nothing is there",
                        ["the listing is empty"],
                        "check the path",
                        worker,
                    )
                )
            else:
                out.append(
                    Check(
                        "storage", "pass", f"the service account can {what} {url}", [], "", worker
                    )
                )
            continue
        message = r.get("message", "")
        if r.get("write") and status == 404:
            out.append(
                Check(
                    "storage",
                    "skip",
                    f"{url}: the job bucket does not exist yet",
                    [message],
                    "`tpuctl run` creates it",
                    worker,
                )
            )
            continue
        if status == 403:
            fix = (
                "give the node's service account roles/storage.objectViewer (to read) or "
                "objectAdmin (to write) on the bucket, and create the node with a scope "
                "that allows it (e.g. cloud-platform)"
            )
        elif status == 404:
            fix = "the bucket does not exist: check the name (gs://BUCKET/...)"
        else:
            fix = "Storage did not answer: check the VM's network (Private Google Access)"
        summary = f"the service account cannot {what} {url} (HTTP {status})"
        out.append(Check("storage", "fail", summary, [message], fix, worker))
    return out


def headroom(worker: int, report: dict[str, Any]) -> list[Check]:
    out = []
    seen = set()
    for d in report.get("disk") or []:
        key = (d.get("mount"), d["size"], d["free"])
        if key in seen or not d["size"]:
            continue
        seen.add(key)
        free = d["free"] / d["size"]
        line = (
            f"{d['path']}: {wording.size(d['free'])} free of {wording.size(d['size'])} ({free:.0%})"
        )
        if free < DISK_FAIL or d["free"] < DISK_FAIL_BYTES:
            out.append(
                Check(
                    "disk",
                    "fail",
                    f"the disk is full at {d['path']}",
                    [line],
                    "delete old outputs, logs and checkpoints (they belong in the "
                    "bucket: $TPUCTL_OUTPUT_DIR is synced there), or attach a data "
                    "disk",
                    worker,
                )
            )
        elif free < DISK_WARN:
            out.append(
                Check(
                    "disk",
                    "warn",
                    f"little disk left at {d['path']}",
                    [line],
                    "free some space",
                    worker,
                )
            )
        else:
            out.append(Check("disk", "pass", f"{d['path']}: {free:.0%} free", [line], "", worker))
    mem = report.get("memory") or {}
    if mem.get("total"):
        frac = (mem.get("available") or 0) / mem["total"]
        line = (
            f"{wording.size(mem.get('available') or 0)} available of {wording.size(mem['total'])}"
        )
        status: Status = "warn" if frac < MEMORY_WARN else "pass"
        fix = "a process uses the host's memory: see `tpuctl top`" if status == "warn" else ""
        out.append(
            Check("memory", status, f"{frac:.0%} of the memory available", [line], fix, worker)
        )
    return out


def last_job(job_id: str | None, state: str | None, tail: list[str], error: str = "") -> Check:
    if not job_id:
        return Check("last-job", "skip", "no job has run on this node (no tpuctl-job label)")
    if error:
        return Check("last-job", "warn", f"job {job_id}: {error}", [], "")
    evidence = [f"log tail: {line}" for line in tail]
    if state in protocol.FINAL and state != protocol.SUCCEEDED:
        return Check(
            "last-job",
            "warn",
            f"the last job, {job_id}, ended {state}",
            evidence,
            f"`tpuctl logs {job_id}` shows the whole log",
        )
    return Check("last-job", "pass", f"the last job, {job_id}, is {state}", evidence)


def _ago(stamp: Any) -> str:
    if not isinstance(stamp, (int, float)):
        return "an unknown time"
    seconds = max(0, int(time.time() - stamp))
    when = time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(stamp))
    return f"{when}, {seconds // 3600}h{seconds % 3600 // 60:02d}m{seconds % 60:02d}s ago"
