"""What `tpuctl run` shows: progress and the job's log as it runs (`CliUI`), and the
job's end (`report`)."""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager
from typing import Any

from tpuctl.cli import render
from tpuctl.errors import JobFailed, TpuctlError
from tpuctl.services.run.spec import states_summary, worker_label


class CliUI:
    """Progress on stderr; the job's log lines on stdout, prefixed per worker on pods
    (`[w1]`), by slice and worker on a multislice job (`[s1/w0]`)."""

    def __init__(self, logs_to_stderr: bool = False) -> None:
        self.prefix = False
        self.workers, self.slices = 1, 1
        self.partial: dict[int, bytes] = {}
        # with --json, stdout carries only the final JSON object
        self.stream = sys.stderr if logs_to_stderr else sys.stdout

    def set_workers(self, count: int, slices: int = 1) -> None:
        self.prefix = count > 1
        self.workers, self.slices = count, slices

    def info(self, message: str) -> None:
        render.info(message)

    def progress(self, label: str) -> AbstractContextManager[Any]:
        return render.progress(label)

    def log(self, worker: int, data: bytes) -> None:
        buf = self.partial.get(worker, b"") + data
        *lines, rest = buf.split(b"\n")
        self.partial[worker] = rest
        out = self.stream.buffer
        if lines and self.stream.isatty():  # the logs in the bucket may be anyone's
            from tpuctl.wording import terminal_bytes

            lines = [terminal_bytes(line) for line in lines]
        for line in lines:
            label = worker_label(worker, self.workers, self.slices)
            out.write((f"[{label}] ".encode() if self.prefix else b"") + line + b"\n")
        out.flush()

    def log_marker(self, text: str) -> None:
        self.flush()
        self.stream.buffer.write(text.encode() + b"\n")
        self.stream.buffer.flush()

    def flush(self) -> None:
        for worker, rest in sorted(self.partial.items()):
            if rest:
                self.log(worker, b"\n")


def _usage(app: Any, runner: Any, project: str, outcome: Any, began: float) -> Any:
    """The job's TensorCore use over its life (services/usage.py), when it started."""
    from tpuctl.services import jobs, usage

    bucket = runner.bucket
    if not outcome.started or bucket is None:
        return None
    return usage.for_job(
        lambda: jobs.statuses(bucket, outcome.job_id),
        app.factory.monitoring,
        project,
        runner.zone,
        runner.job.slice_ids,
        began,
    )


def _receipt(runner: Any, outcome: Any, used: Any) -> None:
    """Where the job's time and money went, said and kept in the bucket for `jobs JOB`."""
    from tpuctl.services import receipt

    outcome.receipt.util = used.util if used is not None else None
    for line in outcome.receipt.lines():
        render.info(f"job {outcome.job_id}: {line}")
    if runner.bucket is not None:
        receipt.save(runner.bucket, outcome.job_id, outcome.receipt)


def failed_json(runner: Any, error: TpuctlError) -> None:
    """--json when tpuctl itself failed (a quota, an interruption, a bad flag): one object
    on stdout all the same, whose `error` tells tpuctl's exit code from a script's."""
    job = runner.job if runner is not None else None
    render.print_json(
        {
            "job": job.job_id if job else None,
            "node": job.node_name if job else None,
            "zone": job.target.zone if job else None,
            "exitStatus": None,
            "states": {},
            "error": {"message": error.message, "exitCode": int(error.exit_code)},
        }
    )


def report(app: Any, runner: Any, outcome: Any, began: float, json_out: bool) -> JobFailed | int:
    """The job's end on stderr (and its JSON on stdout with --json); what tpuctl exits
    with: the job's exit status, or a JobFailed when the job ended without one."""
    from tpuctl.services.run import request as run_request

    spec = runner.job.spec
    target = runner.job.target
    where = f"gs://{runner.bucket.name if runner.bucket else '?'}/tpuctl/jobs/{outcome.job_id}/"
    if spec.detach:
        if json_out:
            render.print_json(
                {"job": outcome.job_id, "node": outcome.node, "zone": runner.zone, "bucket": where}
            )
        else:
            left = run_request.left(runner, runner.zone)
            render.info(f"job {outcome.job_id} started on {outcome.node}; {left}")
            render.info(f"follow it: tpuctl logs {outcome.job_id} -f")
            render.info(f"its outputs, once it ends: tpuctl outputs {outcome.job_id}")
        return 0
    workers = runner.job.workers
    summary = states_summary(outcome.states, workers, spec.slices)
    restarted = f" after {outcome.restarts} restart(s)" if outcome.restarts else ""
    render.info(f"job {outcome.job_id}: {summary}{restarted}; exit status {outcome.exit_status}")
    used = _usage(app, runner, target.project, outcome, began)
    if used is not None:
        render.info(f"job {outcome.job_id}: {used.describe()}")
    render.info(f"logs and outputs: {where}")
    if outcome.environment:
        from tpuctl.services.run.environment import describe

        render.info(f"job {outcome.job_id}: {describe(outcome.environment)}")
    if outcome.outputs:
        render.info(f"downloaded {len(outcome.outputs)} output file(s) to {runner.job.outputs_dir}")
    elif runner.job.outputs_dir is None:
        render.info(f"outputs stay in the bucket: `tpuctl outputs {outcome.job_id}` fetches them")
    if outcome.receipt is not None:
        _receipt(runner, outcome, used)
    if outcome.torn_down:
        render.info(f"deleted {runner.job.what}")
    elif not spec.teardown and not runner.job.node_deleted:
        render.info(
            f"{run_request.left(runner, runner.zone)}: "
            f"`tpuctl delete {outcome.node} --zone {runner.zone}` when done"
        )
    if json_out:
        render.print_json(
            {
                "job": outcome.job_id,
                "node": outcome.node,
                **({"slices": runner.job.slice_ids} if spec.slices > 1 else {}),
                "zone": runner.zone,
                "exitStatus": outcome.exit_status,
                "states": outcome.states,
                "bucket": where,
                **({"environment": outcome.environment} if outcome.environment else {}),
                **(used.to_json() if used is not None else {}),
                **({"receipt": outcome.receipt.to_json()} if outcome.receipt else {}),
                # null: the exit status is the job's; else tpuctl's own failure
                "error": {"message": outcome.message, "exitCode": JobFailed.exit_code}
                if outcome.message
                else None,
            }
        )
    if outcome.message:
        hint = f"see `tpuctl logs {outcome.job_id}`"
        if runner.job.outputs_dir is None:  # else they came home, if the bucket had any
            hint += f"; {run_request.fetch_outputs(outcome.job_id)}"
        return JobFailed(outcome.message, hint=hint)
    return int(outcome.exit_status or 0)
