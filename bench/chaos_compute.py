"""`make chaos`'s Compute Engine scenario (bench/chaos.py runs it; its Harness and Outcome
are passed in):

- sigkill-compute: the client SIGKILLed at a random moment of a `run` on Compute Engine,
            alternately a TPU7x VM (`-a tpu7x-8`) and a v6e slice of four VMs (`-a v6e-16
            --api compute`: a workload policy, an instance template, a managed instance
            group): no VM and no group may outlive the job's end or its start deadline by
            more than a minute (worst case shown). A slice's template and policy bill
            nothing and cannot go from its own VMs (the group refers to them until it is
            gone): the note counts the runs that left them, and the scenario then checks
            that `tpuctl gc --yes` collects them once they are 15 minutes old (the
            emulator ages them; a younger one may be a create under way).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

SHAPES = (("-a", "tpu7x-8", "--zone", "us-central1-c"),
          ("-a", "v6e-16", "--api", "compute", "--zone", "us-east1-d"))  # fmt: skip
BILLING = ("INSTANCE", "INSTANCE_GROUP_MANAGER")  # what the control plane calls them
FREE = ("INSTANCE_TEMPLATE", "WORKLOAD_POLICY")


def _left(h: Any, project: str, kinds: tuple[str, ...]) -> list[str]:
    """The Compute Engine resources of `project` of those kinds (an instance's status is
    its own, RUNNING and so on: every status not of another kind is an instance)."""
    found = []
    for r in h.control.instances():
        kind = r["status"] if r["status"] in FREE + ("INSTANCE_GROUP_MANAGER",) else "INSTANCE"
        if kind in kinds and str(r["name"]).startswith(f"projects/{project}/"):
            found.append(str(r["name"]))
    return found


def _wait(h: Any, project: str, timeout: float) -> float | None:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if not _left(h, project, BILLING):
            return time.monotonic() - start
        time.sleep(0.5)
    return None


def sigkill(h: Any, outcome: Any, runs: int, deadline: float, at_once: int = 4) -> Any:
    out = outcome("SIGKILL of run on Compute Engine at a random moment")
    out.notes.append("worst: seconds from the kill until no VM or group was left")
    h.reset(instant=False)
    h.control.quotas("granted")
    delays = [h.random.uniform(0.3, 6.0) for _ in range(runs)]
    free_left = []

    def one(i: int) -> float | None:
        project = f"chaos-ce-kill-{i}"
        proc = h.spawn("run", str(h.script), *SHAPES[i % 2], "--project", project,
                       "--start-deadline", f"{deadline:g}s", "--", "2", "0")  # fmt: skip
        time.sleep(delays[i])
        proc.kill()
        proc.communicate()
        gone = _wait(h, project, timeout=deadline + 60 + 2)
        if gone is not None and _left(h, project, FREE):
            free_left.append(project)
        return gone

    with ThreadPoolExecutor(at_once) as pool:
        for gone in pool.map(one, range(runs)):
            out.count_gone(gone, "a VM or group outlived the start deadline by a minute")
    if free_left:
        out.notes.append(f"{len(free_left)} runs left a slice's template and policy (no cost)")
    for project in free_left:  # gc's to collect, once old enough not to be a create's
        for path in _left(h, project, FREE):
            h.control.compute_age(path, 16 * 60)  # as if 16 minutes had passed
        r = h.tpuctl("gc", "--project", project, "--zone", "us-east1-d", "--yes")
        if _left(h, project, FREE):
            out.notes.append(f"gc left them: {(r.stderr or r.stdout).strip()[-120:]}")
            break
    else:
        if free_left:
            out.notes.append("gc --yes collected them once 15 minutes old")
    h.reset(instant=True)  # the next scenario starts from nothing
    return out
