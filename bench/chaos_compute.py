"""`make chaos`'s Compute Engine scenarios (bench/chaos.py runs them; its Harness and
Outcome are passed in). Each run goes in a project of its own, alternately on a TPU7x VM
(`-a tpu7x-8`) and a v6e slice of four VMs (`-a v6e-16 --api compute`: a workload
policy, an instance template, a managed instance group):

- faults-compute: `run` jobs under 30% transient API faults (429, 500, 503, 504; half
            of them after the request took effect), exit codes alternating: the exit
            status must be the script's, every worker's status final, no VM or group
            left a minute later, no traceback;
- sigkill-compute: the client SIGKILLed at a random moment of a `run`: no VM and no
            group may outlive the job's end or its start deadline by more than a minute
            (worst case shown);
- signals-compute: SIGINT, once or twice, at a random moment of `run` and `create`
            (bench/chaos_compute_signals.py);
- preempt-compute: one VM of a running slice job preempted, with and without notice
            (bench/chaos_compute_signals.py).

A slice's template and policy bill nothing, and a slice's own VMs cannot delete them
(the group refers to them until it is gone): the notes count the runs that left them,
and each scenario then checks that `tpuctl gc --yes` collects them once they are 15
minutes old (the emulator ages them; a younger one may be a create under way).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from tpuctl.agent import protocol

SINGLE = ("-a", "tpu7x-8", "--zone", "us-central1-c")
SLICE = ("-a", "v6e-16", "--api", "compute", "--zone", "us-east1-d")
SHAPES = (SINGLE, SLICE)
BILLING = ("INSTANCE", "INSTANCE_GROUP_MANAGER")  # what the control plane calls them
FREE = ("INSTANCE_TEMPLATE", "WORKLOAD_POLICY")
FAULT_CODES = [429, 500, 503, 504]


def traceback(text: str) -> bool:
    return "Traceback (most recent call last)" in text or "error: unexpected " in text


def left(h: Any, project: str, kinds: tuple[str, ...] = BILLING) -> list[str]:
    """The Compute Engine resources of `project` of those kinds (an instance's status is
    its own, RUNNING and so on: every status not of another kind is an instance)."""
    found = []
    for r in h.control.instances():
        kind = r["status"] if r["status"] in FREE + ("INSTANCE_GROUP_MANAGER",) else "INSTANCE"
        if kind in kinds and str(r["name"]).startswith(f"projects/{project}/"):
            found.append(str(r["name"]))
    return found


def until(condition: Callable[[], object], timeout: float, every: float = 0.5) -> float | None:
    """Seconds until `condition` held, or None if it did not within `timeout`."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if condition():
            return time.monotonic() - start
        time.sleep(every)
    return None


def finish(proc: subprocess.Popen[str], timeout: float) -> tuple[str, bool]:
    """`proc`'s stderr once it ended, and whether it had to be killed after `timeout`."""
    try:
        return proc.communicate(timeout=timeout)[1], False
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.communicate()[1], True


def wait_gone(h: Any, project: str, timeout: float) -> float | None:
    """Seconds until no VM or group of `project` was left, or None."""
    return until(lambda: not left(h, project), timeout)


def worker_states(h: Any, project: str) -> dict[int, str]:
    """The state of each worker's status of `project`'s job (its bucket holds one job)."""
    from google.api_core.exceptions import NotFound
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    client = storage.Client(
        project=project,
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": h.control.status()["storage_endpoint"]},
    )
    states = {}
    try:
        for blob in client.list_blobs(f"{project}-tpuctl", prefix=protocol.JOBS):
            if "/status/" in blob.name:
                with_status = json.loads(blob.download_as_bytes())
                states[int(with_status.get("worker", 0))] = str(with_status.get("state"))
    except NotFound:  # no bucket yet, or a status rewritten under the listing
        pass
    return states


def unfinished(states: dict[int, str], workers: int) -> str:
    """'' when `workers` statuses are there and every one is final; else what is not."""
    if len(states) < workers:
        return f"{len(states)} of {workers} statuses"
    working = {k: s for k, s in states.items() if s not in protocol.FINAL}
    return f"statuses left {working}" if working else ""


@dataclass
class Verdict:
    """One run's verdict (`note`: what was wrong; '' for a right run)."""

    project: str
    what: str = ""
    note: str = ""
    traceback: bool = False
    leaked: bool = False
    free_left: bool = False  # the run left a slice's template and policy
    worst: float = 0.0


def tally(h: Any, out: Any, results: list[Verdict]) -> list[str]:
    """Count `results` into `out`, after looking once more for a VM or group that appeared
    after its run was judged (a create request still on its way when the client ended);
    returns the projects whose runs left a slice's template and policy."""
    for r in results:
        late = [] if r.leaked else left(h, r.project)
        if late:
            r.leaked = True
            names = ", ".join(p.rsplit("/", 1)[1] for p in late)
            r.note = f"{r.note or r.what}; then {names} appeared, after it had ended"
        out.runs += 1
        out.good += not r.note
        out.tracebacks += r.traceback
        out.leaked += r.leaked
        out.worst = max(out.worst, r.worst)
        if r.note:
            out.notes.append(r.note.replace("\n", " | "))
    return [r.project for r in results if r.free_left and not r.leaked]


def collect_free(h: Any, out: Any, projects: list[str]) -> None:
    """Note the runs that left a slice's template and policy, and check that `tpuctl gc
    --yes` collects them once they are 15 minutes old."""
    if not projects:
        return
    runs = f"{len(projects)} run{'s' if len(projects) > 1 else ''}"
    out.notes.append(f"{runs} left a slice's template and policy (no cost)")
    for project in projects:
        for path in left(h, project, FREE):
            h.control.compute_age(path, 16 * 60)  # as if 16 minutes had passed
        r = h.tpuctl("gc", "--project", project, "--zone", SLICE[-1], "--yes")
        if left(h, project, FREE):
            said = (r.stderr or r.stdout).strip()[-160:].replace("\n", " | ")
            out.notes.append(f"gc left them: {said}")
            return
    out.notes.append("gc --yes collected them once 15 minutes old")


def faults(h: Any, outcome: Any, runs: int, at_once: int = 3) -> Any:
    out = outcome("run on Compute Engine under 30% API faults")
    h.reset(instant=True)
    h.control.quotas("granted")
    h.control.faults(rate=0.3, codes=FAULT_CODES, after_rate=0.5, seed=h.random.randrange(1 << 30))

    def one(i: int) -> Verdict:
        code, shape, project = (0, 1, 3)[i % 3], SHAPES[i % 2], f"chaos-ce-faults-{i}"
        proc = h.spawn("run", str(h.script), *shape, "--project", project,
                       "--", "0", str(code))  # fmt: skip
        err, killed = finish(proc, 300)
        what = f"{shape[1]} exit {proc.returncode} for {code}"
        if killed:
            states = worker_states(h, project)
            why = f"{shape[1]}: no end within 300 s (statuses {states}): {err.strip()[-300:]}"
            return Verdict(project, what, why, leaked=wait_gone(h, project, 60) is None)
        if traceback(err):
            return Verdict(project, what, f"{what}: {err.strip()[-200:]}", traceback=True)
        if wait_gone(h, project, timeout=60) is None:
            names = ", ".join(p.rsplit("/", 1)[1] for p in left(h, project))
            return Verdict(project, what, f"{what}: {names} left a minute after", leaked=True)
        wrong = unfinished(worker_states(h, project), 4 if shape is SLICE else 1)
        if proc.returncode != code or wrong:
            why = f"{what}{', ' + wrong if wrong else ''}: {err.strip()[-160:]}"
            return Verdict(project, what, why)
        return Verdict(project, what, free_left=bool(left(h, project, FREE)))

    with ThreadPoolExecutor(at_once) as pool:
        results = list(pool.map(one, range(runs)))
    h.control.faults()
    collect_free(h, out, tally(h, out, results))
    h.reset(instant=True)  # the next scenario starts from nothing
    return out


def sigkill(h: Any, outcome: Any, runs: int, deadline: float, at_once: int = 4) -> Any:
    out = outcome("SIGKILL of run on Compute Engine at a random moment")
    out.notes.append("worst: seconds from the kill until no VM or group was left")
    h.reset(instant=False)
    h.control.quotas("granted")
    delays = [h.random.uniform(0.3, 6.0) for _ in range(runs)]
    free_left: list[str] = []
    failed: list[str] = []

    def one(i: int) -> float | None:
        project = f"chaos-ce-kill-{i}"
        proc = h.spawn("run", str(h.script), *SHAPES[i % 2], "--project", project,
                       "--start-deadline", f"{deadline:g}s", "--", "2", "0")  # fmt: skip
        time.sleep(delays[i])
        ended = proc.poll()  # a run that failed before the kill tests nothing
        proc.kill()
        _, err = proc.communicate()
        if ended:
            last = (err.strip().splitlines() or ["(nothing)"])[-1][:160]
            failed.append(f"a run had failed before the kill (exit {ended}): {last}")
        gone = wait_gone(h, project, timeout=deadline + 60 + 2)
        if gone is not None and left(h, project, FREE):
            free_left.append(project)
        return gone

    with ThreadPoolExecutor(at_once) as pool:
        for gone in pool.map(one, range(runs)):
            out.count_gone(gone, "a VM or group outlived the start deadline by a minute")
    out.notes += failed
    out.good -= len(failed)
    collect_free(h, out, free_left)
    h.reset(instant=True)  # the next scenario starts from nothing
    return out
