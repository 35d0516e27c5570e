"""A job's node whose TPU did not come up: replaced, not blamed on the script.

An agent that finds its worker's TPU broken (before the script: agent/tpu_preflight.py;
in the script's early failure: agent/tpu_health.py) ends the attempt FAILED with
`"reason": "tpu_unhealthy"` and `"evidence"`, the line that says so; worker 0 tears the
node down, as after a preemption. The runner replaces it (`provision.recreate`: delete
what is left and create, the users' own fix for such a node) and starts the next attempt, which
resumes from the job's last synced outputs: a repair, at most `--repairs` of them
(default 1), counted apart from --restarts and shown in the receipt ("1 repair"). With
none left the job ends with one line naming the worker and the evidence (exit status
1, as any job that did not succeed), and the node is deleted unless kept (--keep).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tpuctl.services.run import provision
from tpuctl.services.run.spec import Job, JobOutcome
from tpuctl.wording import printable

Statuses = dict[int, dict[str, Any]]

REASON = "tpu_unhealthy"  # the agents' status reason (agent/tpu_health.py, tpu_preflight.py)
REPAIR = "repair"  # the receipt's name for a restart on a replaced node


def broken(job: Job, final: Statuses) -> tuple[str, str] | None:
    """(the worker, as named to the user, and its evidence) of the first worker whose
    status says its TPU did not come up; None when none does."""
    for w, status in sorted(final.items()):
        if status.get("reason") == REASON:
            named = str(w) if job.spec.slices <= 1 else job.label(w)
            evidence = status.get("evidence")
            said = printable(evidence[:300]) if isinstance(evidence, str) else ""
            return named, said or "no evidence given"
    return None


def used(job: Job) -> int:
    return job.restarts_for.get(REPAIR, 0)


def can_repair(job: Job) -> bool:
    return used(job) < job.spec.repairs


def replace(job: Job, worker: str, evidence: str) -> None:
    """Replace the node (the next attempt is the caller's), counted as a repair."""
    job.ui.info(
        f"worker {worker}'s TPU did not come up ({evidence}) during attempt {job.attempt}; "
        f"replacing {job.what} and resuming the job (repair {used(job) + 1} of "
        f"{job.spec.repairs})"
    )
    job.agents_started = False  # until they start on the new node
    since = time.time()
    provision.recreate(job)
    job.recovery += time.time() - since
    job.restarts_for[REPAIR] = used(job) + 1


def handle(
    job: Job,
    final: Statuses,
    next_attempt: Callable[[], None],
    finish: Callable[[Statuses], JobOutcome],
) -> JobOutcome | None:
    """After an attempt whose worker's TPU did not come up: the node replaced and the
    next attempt started (None), or, with no repair left or the job's TTL or max cost
    reached, the job's end, its node deleted here (the agent left it)."""
    found = broken(job, final)
    assert found is not None
    worker, evidence = found
    if can_repair(job) and not provision.expired(job):
        replace(job, worker, evidence)
        next_attempt()
        return None
    job.agent_teardown = False  # the agent left the node: nobody else deletes it
    outcome = finish(final)
    outcome.message = message(job, worker, evidence, bool(outcome.torn_down))
    return outcome


def message(job: Job, worker: str, evidence: str, torn_down: bool) -> str:
    """The one line a job ends with when its node is not replaced."""
    where = "the node was deleted" if torn_down else f"{job.what} is kept (--keep)"
    return (
        f"worker {worker}'s TPU did not come up: {evidence}; {where} "
        f"(--repairs {job.spec.repairs}: {used(job)} used)"
    )
