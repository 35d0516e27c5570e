"""`tpuctl doctor NODE`: walk the troubleshooting chain on a live node.

The node as the API describes it (state, health, symptoms); then one SSH round trip per
worker, all at once, that runs the agent bundle's `checkup` (tpuctl/agent/checkup.py,
sent on stdin as gc's idle probe does: nothing is installed) and returns JSON; then the
last job's record and log tail from the bucket. `fix` (the CLI's --fix) makes a second
round trip to the workers that need a repair: a stale lockfile is removed without
asking, a process holding the TPU is stopped only when `confirm` agrees.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tpuctl.agent import bundle
from tpuctl.cloud import registry
from tpuctl.errors import NotFoundError, TpuctlError
from tpuctl.models import Node
from tpuctl.services import jobs, records, remote
from tpuctl.services import ssh as ssh_service
from tpuctl.services.idle import bundle_on_stdin
from tpuctl.services.node_doctor import checks as nc
from tpuctl.services.node_doctor.checks import Check

if TYPE_CHECKING:
    from tpuctl.cloud.backend import TpuBackend
    from tpuctl.cloud.ssh import Endpoint, Session, SshApi
    from tpuctl.cloud.storage import Bucket

JOB_LABEL = "tpuctl-job"
TAIL_LINES = 10
LOG_TAIL = 64 << 10  # bytes of the end of each log read for those lines
TIMEOUT = 60.0


def checkup_command(args: list[str]) -> str:
    """The bundle's checkup, sent on stdin and run as root where the VM lets us (another
    user's process would otherwise hide what it holds), as gc's idle probe runs."""
    return bundle_on_stdin("checkup", *args)


@dataclass
class Report:
    node: str
    checks: list[Check] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(c.status == "fail" for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "failed": self.failed,
            "checks": [c.to_json() for c in self.checks],
        }


def _gather(
    ssh: SshApi, plan: ssh_service.Plan, args: Callable[[int], list[str] | None], timeout: float
) -> dict[int, dict[str, Any] | str]:
    """Run the checkup on the plan's workers for which `args` gives arguments: its JSON,
    or why there is none."""
    source = bundle.build()
    outputs: dict[int, bytearray] = {ep.worker: bytearray() for ep in plan.endpoints}
    errors: dict[int, bytearray] = {ep.worker: bytearray() for ep in plan.endpoints}

    async def action(session: Session, ep: Endpoint) -> int:
        def collect(stream: str, data: bytes) -> None:
            (outputs if stream == "stdout" else errors)[ep.worker].extend(data)

        return await session.run(checkup_command(args(ep.worker) or []), collect, stdin=source)

    chosen = [ep for ep in plan.endpoints if args(ep.worker) is not None]
    sub = ssh_service.Plan(**{**plan.__dict__, "endpoints": chosen})
    answers: dict[int, dict[str, Any] | str] = {}
    for result in remote.on_workers(
        ssh, sub, action, connect_timeout=timeout, action_timeout=timeout
    ):
        if result.status:
            said = errors[result.worker].decode(errors="replace").strip().splitlines()[-1:]
            answers[result.worker] = (
                result.error or f"the checkup exited {result.status}: {' '.join(said)}"
            )
            continue
        try:
            answers[result.worker] = dict(json.loads(outputs[result.worker].splitlines()[-1]))
        except (ValueError, IndexError):
            answers[result.worker] = "the checkup said nothing readable"
    return answers


def _last_job(node: Node, bucket: Bucket) -> tuple[Check, list[str]]:
    """The last job's check, and the gs:// paths its arguments name."""
    job_id = node.labels.get(JOB_LABEL)
    if not job_id:
        return nc.last_job(None, None, []), []
    try:
        record = records.read_job_record(bucket, job_id)
        state, chunks, _ = jobs.read_logs(bucket, job_id, {}, tail=LOG_TAIL)
        lines: list[str] = []
        for worker, data in chunks:  # read as taken: errors come here too
            lines += [f"w{worker}: {ln}" for ln in data.decode(errors="replace").splitlines()]
    except NotFoundError:
        return nc.last_job(job_id, None, [], "no record in the bucket"), []
    except TpuctlError as e:
        return nc.last_job(job_id, None, [], f"cannot read it: {e}"), []
    paths = [a for a in record.get("args") or [] if isinstance(a, str) and a.startswith("gs://")]
    return nc.last_job(job_id, state, lines[-TAIL_LINES:]), paths


def examine(
    backends: TpuBackend | Sequence[TpuBackend],
    ssh: SshApi,
    full_name: str,
    open_bucket: Callable[[Node], Bucket],
    paths: list[str],
    fix: bool = False,
    confirm: Callable[[str], bool] = lambda question: False,
    timeout: float | None = None,
) -> Report:
    """Every check of the chain on the node `full_name` (NotFoundError when absent), on
    the first of the `backends` that has it (a Cloud TPU API node, or a Compute Engine TPU
    VM or slice: each of its VMs is a worker, in worker order); `open_bucket(node)` is the
    job bucket (the one the node names, or the default)."""
    from tpuctl.services.lookup import find_node

    timeout = TIMEOUT if timeout is None else timeout
    api, node = find_node(backends, full_name)
    bucket = open_bucket(node)
    report = Report(node.name)
    report.checks.append(nc.node_state(node))
    job_check, job_paths = _last_job(node, bucket)
    if node.state != "READY":
        report.checks.append(Check("ssh", "skip", f"not tried: the node is {node.state}"))
        report.checks.append(job_check)
        return report
    try:
        plan = ssh_service.plan(api, ssh, full_name, "all", wait=timeout)
    except TpuctlError as e:
        report.checks.append(Check("ssh", "fail", f"cannot connect: {e}", [], e.hint or ""))
        report.checks.append(job_check)
        return report
    gs = list(dict.fromkeys([*paths, *job_paths]))
    first = [a for p in gs for a in ("--gs", p)] + ["--bucket", bucket.name]

    # a CPU-idle holder's TensorCores: Monitoring's, on the series of what the worker runs
    # on (agent/target.py: the node, in the VM's own project and zone)
    on = list(registry.kind(node.api).agent_target(full_name.rsplit("/", 1)[-1]))

    def whose(worker: int) -> list[str]:
        return [*on, "--worker", str(worker)]

    answers = _gather(ssh, plan, lambda w: (first if w == 0 else []) + whose(w), timeout)
    if fix:
        answers.update(_repair(ssh, plan, answers, confirm, timeout, whose))
    for worker, answer in sorted(answers.items()):
        if isinstance(answer, str) and answer.startswith("the checkup"):
            # connected, but the program failed (e.g. no python3 on the VM)
            by_hand = "run it by hand to see why: `tpuctl exec NODE -- python3 --version`"
            report.checks.append(Check("checkup", "fail", answer, [], by_hand, worker))
            continue
        if isinstance(answer, str):
            why = ssh_hint(plan)
            report.checks.append(Check("ssh", "fail", answer, [], why, worker))
            continue
        user = answer.get("user", "?")
        report.checks.append(
            Check(
                "ssh",
                "pass",
                "answers over SSH",
                [f"as {plan.user} ({user})"],
                "",
                worker,
            )
        )
        fixed = list(answer.get("fixed") or [])
        report.checks += [
            nc.devices(worker, answer, node),
            nc.lockfile(worker, answer, fixed),
            nc.holders(worker, answer, fixed),
            nc.framework_versions(worker, answer, node.runtime_version),
            *nc.storage(worker, answer),
            *nc.headroom(worker, answer),
        ]
    report.checks.append(job_check)
    return report


def ssh_hint(plan: ssh_service.Plan) -> str:
    if plan.oslogin:
        return "OS Login: the account needs roles/compute.osLogin on the project"
    if plan.key_added:
        return "tpuctl's key was just added to the node's metadata: the VM needs a moment"
    return "`tpuctl ssh NODE --worker K` shows what OpenSSH says"


def _repair(
    ssh: SshApi,
    plan: ssh_service.Plan,
    answers: dict[int, dict[str, Any] | str],
    confirm: Callable[[str], bool],
    timeout: float,
    whose: Callable[[int], list[str]],
) -> dict[int, dict[str, Any] | str]:
    """The second round trip: the repairs each worker needs (and agreed ones)."""
    wanted: dict[int, list[str]] = {}
    for worker, answer in answers.items():
        if isinstance(answer, str):
            continue
        args: list[str] = []
        if (answer.get("lockfile") or {}).get("stale"):
            args.append("--remove-stale-lockfile")
        for h in answer.get("holders") or []:
            state = "busy" if h.get("busy") else "idle"
            question = (
                f"stop pid {h['pid']} ({h['command'][:60]}, {state}) on worker {worker}, "
                "which holds the TPU?"
            )
            if confirm(question):
                args += ["--stop", str(h["pid"])]
        if args:
            wanted[worker] = args
    if not wanted:
        return {}
    return _gather(ssh, plan, lambda w: wanted[w] + whose(w) if w in wanted else None, timeout)
