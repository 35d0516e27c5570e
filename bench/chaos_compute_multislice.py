"""`make chaos`'s multislice scenario on Compute Engine (bench/chaos.py runs it; its
Harness and Outcome are passed in; the checks are bench/chaos_compute.py's). Every run is
`tpuctl run --slices 2 -a tpu7x-8` (two single-host TPU7x slices, made as one unit) in a
project of its own:

- faults: under 30% transient API faults (429, 500, 503, 504; half of them after the
          request took effect), exit codes alternating: the exit status must be the
          script's, both workers' statuses final, no VM left a minute later;
- sigkill: the client SIGKILLed at a random moment (0.3-8 s into the run of an 8 s
          job): no VM may outlive the job's end or the boot guard's time (its start
          deadline, which bounds the lease) by more than a minute (worst case shown);
- preempt: the VM of one slice preempted while the job runs with `--spot --restarts 1`
          (with 3 s of notice and with none): every slice is made again and attempt 2
          ends the job with the script's exit status 0; no VM left a minute later.

None may print a traceback. All go together, a few at a time: the faults are injected
into the fault runs' projects alone (the emulator's `paths`).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import chaos_compute as ce

MULTISLICE = ("-a", "tpu7x-8", "--zone", "us-central1-c", "--slices", "2")
WORKERS = 2  # one per slice
FAULTED = "chaos-ms-faults-"  # the projects of the fault runs: `FAULTED<i>`
# attempt 1 runs until something ends it (a preemption), a later attempt ends at once
SCRIPT = (
    "import os, sys, time\n"
    "first = os.environ.get('TPUCTL_RESTART', '0') == '0'\n"
    "time.sleep(float(sys.argv[1]) if first else 0.5)\n"
    "sys.exit(int(sys.argv[2]))\n"
)


def multislice(
    h: Any, outcome: Any, faults: int, kills: int, preempts: int, deadline: float, at_once: int
) -> Any:
    out = outcome("run --slices 2 on Compute Engine: faults, SIGKILL, a slice preempted")
    out.notes.append("worst: seconds from a kill until no VM was left")
    folder = Path(h.root) / "multislice"  # a work dir of its own: shipped whole
    folder.mkdir(exist_ok=True)
    script = folder / "job.py"
    script.write_text(SCRIPT)
    h.reset(instant=True)
    h.control.quotas("granted")
    # the faults hit the fault runs' projects (their API paths, their buckets) alone, so
    # that the kills and preemptions go at the same time
    h.control.faults(rate=0.3, codes=ce.FAULT_CODES, after_rate=0.5, paths=f"{FAULTED}\\d",
                     seed=h.random.randrange(1 << 30))  # fmt: skip
    moments = [h.random.uniform(0.3, 8.0) for _ in range(kills)]
    plan = [(h.random.randrange(WORKERS), 3.0 if i % 2 else 0.0) for i in range(preempts)]
    runs = [partial(_preempt_one, h, script, i, *plan[i]) for i in range(preempts)]
    runs += [partial(_kill_one, h, script, i, moments[i], deadline) for i in range(kills)]
    runs += [partial(_fault_one, h, script, i) for i in range(faults)]
    with ThreadPoolExecutor(at_once) as pool:  # the longest (preemptions) first
        results = list(pool.map(lambda run: run(), runs))
    h.control.faults()
    ce.collect_free(h, out, ce.tally(h, out, results))
    h.reset(instant=True)  # the next scenario starts from nothing
    return out


def _fault_one(h: Any, script: Path, i: int) -> ce.Verdict:
    code, project = (0, 1, 3)[i % 3], f"{FAULTED}{i}"
    proc = h.spawn("run", str(script), *MULTISLICE, "--project", project, "--", "0", str(code))
    err, killed = ce.finish(proc, 300)
    what = f"faults: exit {proc.returncode} for {code}"
    if killed:
        why = f"{what}: no end within 300 s: {err.strip()[-300:]}"
        return ce.Verdict(project, what, why, leaked=ce.wait_gone(h, project, 60) is None)
    return _judged(h, project, what, err, proc.returncode == code)


def _kill_one(h: Any, script: Path, i: int, moment: float, deadline: float) -> ce.Verdict:
    project = f"chaos-ms-kill-{i}"
    what = f"SIGKILL at {moment:.1f} s"
    proc = h.spawn("run", str(script), *MULTISLICE, "--project", project,
                   "--start-deadline", f"{deadline:g}s", "--", "8", "0")  # fmt: skip
    time.sleep(moment)
    ended = proc.poll()  # a run that had ended before the kill tests nothing
    proc.kill()
    _, err = proc.communicate()
    if ended is not None:
        last = (err.strip().splitlines() or ["(nothing)"])[-1][:160]
        return ce.Verdict(project, what, f"{what}: it had ended before (exit {ended}): {last}")
    # the job lasts 8 s; the boot guard bounds a slice whose agent never started
    gone = ce.wait_gone(h, project, timeout=deadline + 60 + 2)
    if gone is None:
        names = ", ".join(p.rsplit("/", 1)[1] for p in ce.left(h, project))
        why = f"{what}: {names} outlived the guard by a minute"
        return ce.Verdict(project, what, why, leaked=True)
    return ce.Verdict(project, what, worst=gone, free_left=bool(ce.left(h, project, ce.FREE)))


def _preempt_one(h: Any, script: Path, i: int, worker: int, notice: float) -> ce.Verdict:
    project = f"chaos-ms-preempt-{i}"
    what = f"slice {worker} preempted with {notice:g} s notice"
    proc = h.spawn("run", str(script), *MULTISLICE, "--project", project, "--spot",
                   "--restarts", "1", "--", "300", "0")  # fmt: skip

    def running() -> bool:
        states = ce.worker_states(h, project)
        return len(states) == WORKERS and set(states.values()) == {"RUNNING"}

    if ce.until(running, 180, every=1.0) is None:
        proc.kill()
        _, err = proc.communicate()
        return ce.Verdict(project, what, f"{what}: the job never ran on both slices: {err[-160:]}")
    vms = [p.rsplit("/", 1)[1] for p in ce.left(h, project) if "/instances/" in p]
    node = next((n for n in vms if n.endswith(f"-{worker}")), "?")
    r = h.tpuctl("emulator", "preempt", node, "--zone", MULTISLICE[3], "--project", project,
                 "--notice", f"{notice:g}s")  # fmt: skip
    err, killed = ce.finish(proc, 240)
    if killed or r.returncode:
        said = r.stderr.strip()[-160:] if r.returncode else "no end within 240 s"
        return ce.Verdict(project, what, f"{what}: {said}: {err.strip()[-200:]}",
                          leaked=ce.wait_gone(h, project, 60) is None)  # fmt: skip
    again = "restart 1 of 1" in err  # every slice made again, attempt 2 ran
    return _judged(h, project, what, err + r.stderr, proc.returncode == 0 and again)


def _judged(h: Any, project: str, what: str, err: str, right: bool) -> ce.Verdict:
    """A run that ended: right when `right`, no traceback, every status final and no VM
    left a minute later."""
    if ce.traceback(err):
        return ce.Verdict(project, what, f"{what}: {err.strip()[-200:]}", traceback=True)
    if ce.wait_gone(h, project, timeout=60) is None:
        names = ", ".join(p.rsplit("/", 1)[1] for p in ce.left(h, project))
        return ce.Verdict(project, what, f"{what}: {names} left a minute after", leaked=True)
    wrong = ce.unfinished(ce.worker_states(h, project), WORKERS)
    if not right or wrong:
        return ce.Verdict(project, what, f"{what}{', ' + wrong if wrong else ''}: {err[-160:]}")
    return ce.Verdict(project, what, free_left=bool(ce.left(h, project, ce.FREE)))
