"""`make chaos`'s Compute Engine scenarios of signals and preemption (bench/chaos.py runs
them; its Harness and Outcome are passed in; the shapes and checks are
bench/chaos_compute.py's). Each run goes in a project of its own, two at a time:

- signals-compute: SIGINT at a random moment of `run` (a 3 s job) and of `create`, on a
            TPU7x VM and on a v6e slice of four VMs in turn, every other pair of runs a
            second SIGINT up to 0.3 s later: exit 130 with an `error:` line (or the
            command's own status, when it had ended), never a traceback or death by the
            signal; nothing left billing that the user did not ask to keep (a `create`
            keeps what it made, and must name it);
- preempt-compute: one VM of a v6e slice (a random worker) preempted while its
            `run --spot --restarts 0` job runs, with 3 s of notice and with none
            (`tpuctl emulator preempt NODE --worker K --notice S`): `run` ends within 2
            minutes, non-zero, saying PREEMPTED; every worker's status is final (none
            stays RUNNING); no VM or group is left a minute later.
"""

from __future__ import annotations

import contextlib
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import chaos_compute as ce

SAID_DELETED = ("will be deleted by its agent", "is being deleted (the cloud has")


def signals(h: Any, outcome: Any, runs: int, at_once: int = 2) -> Any:
    out = outcome("SIGINT in run and create on Compute Engine")
    h.reset(instant=False)
    h.control.quotas("granted")
    moments = [(h.random.uniform(0.05, 8.0), h.random.uniform(0.0, 0.3)) for _ in range(runs)]
    with ThreadPoolExecutor(at_once) as pool:
        results = list(pool.map(lambda i: _signal_one(h, i, *moments[i]), range(runs)))
    ce.collect_free(h, out, ce.tally(h, out, results))
    h.reset(instant=True)  # the next scenario starts from nothing
    return out


def _signal_one(h: Any, i: int, first: float, second: float) -> ce.Verdict:
    kind, shape, twice = ("run", "create")[i % 2], ce.SHAPES[(i // 2) % 2], (i // 4) % 2 == 1
    project, name = f"chaos-ce-sig-{i}", f"chaos-keep-{i}"
    flags = [*shape, "--project", project]  # the last four: where the node is
    if kind == "run":
        proc = h.spawn("run", str(h.script), *flags, "--", "3", "0")
    else:
        proc = h.spawn("create", name, *flags)
    time.sleep(first)
    proc.send_signal(signal.SIGINT)
    if twice:
        time.sleep(second)
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGINT)
    what = f"{kind} {shape[1]} after SIGINT{' twice' if twice else ''} at {first:.1f} s"
    err, killed = ce.finish(proc, 150)
    if killed:
        return ce.Verdict(project, what, f"{what}: no end within 150 s")
    result = ce.Verdict(project, what, traceback=ce.traceback(err))
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    mute = proc.returncode < 0 or (proc.returncode == 130 and not errors)
    remaining = ce.left(h, project)
    if kind == "run" and remaining and any(s in err for s in SAID_DELETED):
        # left at once, as a second signal asks: the job's agent deletes the VMs when the
        # job ends (a 3 s job), or the cloud has the run's delete already
        remaining = [] if ce.wait_gone(h, project, timeout=90) is not None else ce.left(h, project)
    kept = kind == "create" and (proc.returncode == 0 or name in err)
    if kept:  # the user's node: its VM, or its group and the group's VMs
        remaining = [p for p in remaining if not p.rsplit("/", 1)[1].startswith(name)]
        h.tpuctl("delete", name, *flags[-4:], "--yes", "--missing-ok")
    if remaining:
        result.leaked = True
        names = ", ".join(p.rsplit("/", 1)[1] for p in remaining)
        result.note = f"{what}: left {names}, exit {proc.returncode}, said {err[-300:]!r}"
    elif result.traceback or mute:
        result.traceback = True  # died by the signal, or ended without a word
        result.note = f"{what}: exit {proc.returncode}, ending {err[-300:]!r}"
    elif proc.returncode not in (0, 130):
        result.note = f"{what}: exit {proc.returncode}, ending {err[-200:]!r}"
    elif ce.left(h, project, ce.FREE):
        result.free_left = True
    return result


def preempt(h: Any, outcome: Any, runs: int, at_once: int = 2) -> Any:
    out = outcome("one VM of a slice preempted mid-job")
    out.notes.append("worst: seconds from the preemption until run ended and no VM was left")
    h.reset(instant=True)
    h.control.quotas("granted")
    plan = [
        (h.random.randrange(4), 3.0 if i % 2 == 0 else 0.0, h.random.uniform(0.0, 2.0))
        for i in range(runs)
    ]
    with ThreadPoolExecutor(at_once) as pool:
        results = list(pool.map(lambda i: _preempt_one(h, i, *plan[i]), range(runs)))
    ce.collect_free(h, out, ce.tally(h, out, results))
    h.reset(instant=True)
    return out


def _preempt_one(h: Any, i: int, worker: int, notice: float, delay: float) -> ce.Verdict:
    project = f"chaos-ce-preempt-{i}"
    what = f"worker {worker} preempted with {notice:g} s notice"
    proc = h.spawn("run", str(h.script), *ce.SLICE, "--project", project, "--spot",
                   "--restarts", "0", "--", "300", "0")  # fmt: skip

    def running() -> bool:
        states = ce.worker_states(h, project)
        return len(states) == 4 and set(states.values()) == {"RUNNING"}

    if ce.until(running, 180, every=1.0) is None:
        proc.kill()
        _, err = proc.communicate()
        why = f"{what}: the job never ran on every worker: {err.strip()[-160:]}"
        return ce.Verdict(project, what, why)
    time.sleep(delay)
    groups = [p for p in ce.left(h, project) if "/instanceGroupManagers/" in p]
    node = groups[0].rsplit("/", 1)[1] if groups else "?"
    fault = time.monotonic()
    r = h.tpuctl("emulator", "preempt", node, "--zone", ce.SLICE[-1], "--project", project,
                 "--worker", str(worker), "--notice", f"{notice:g}s")  # fmt: skip
    err, _ = ce.finish(proc, 150)
    ended = time.monotonic() - fault
    gone = ce.wait_gone(h, project, timeout=60)
    result = ce.Verdict(project, what, traceback=ce.traceback(err) or ce.traceback(r.stderr))
    wrong = ce.unfinished(ce.worker_states(h, project), 4)
    if gone is None:
        result.leaked = True
        names = ", ".join(p.rsplit("/", 1)[1] for p in ce.left(h, project))
        result.note = f"{what}: {names} left a minute after run ended"
    elif r.returncode or wrong or result.traceback:
        said = (r.stderr.strip() if r.returncode else "") + err.strip()[-200:]
        result.note = f"{what}: preempt exit {r.returncode}, {wrong or 'statuses final'}: {said}"
    elif ended > 120 or proc.returncode in (0, None) or "PREEMPTED" not in err:
        last = err.strip().splitlines()[-1:] or ["(nothing)"]
        result.note = f"{what}: run exit {proc.returncode} after {ended:.0f} s: {last[0][:160]}"
    else:
        result.worst = ended + gone
        if ce.left(h, project, ce.FREE):
            result.free_left = True
    return result
