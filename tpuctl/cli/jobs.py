"""tpuctl jobs / logs JOB / cancel JOB: jobs as the bucket records them."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from tpuctl.cli import complete, declare, render
from tpuctl.cli.options import (
    AppEnv,
    Filter,
    Format,
    JobRef,
    Json,
    Limit,
    Project,
    SortBy,
    Wide,
    app_of,
)

Bucket = Annotated[
    str | None, declare.Option("--bucket", help="gs://BUCKET (default gs://PROJECT-tpuctl).")
]


def job_bucket(app: AppEnv, project: str | None, bucket: str | None) -> Any:
    from tpuctl.config import load_config_file
    from tpuctl.services import staging

    target = app.target(project, None, need_zone=False)
    config = load_config_file()
    b = app.factory.bucket(staging.bucket_name(bucket, config, target.project), target.project)
    # the default name is predictable: one another project made is not read (or written,
    # by cancel) as this project's, as `run` will not use it
    named_by = staging.bucket_source(bucket, config, target.project)
    staging.check_owner(b, target.project, app.factory.iam().project_number, named_by, render.info)
    return b


def usage_notes(rows: list[dict[str, Any]]) -> None:
    """Say once why no job has TensorCore figures when Monitoring could not be read."""
    notes = {r.get("metricsNote") for r in rows}
    unavailable = [n for n in notes if n and n.startswith("metrics unavailable")]
    if unavailable:
        render.info(f"no TensorCore figures: {unavailable[0]}")


JOB_COLUMNS = [
    render.Col("JOB", ident=True),
    render.Col("NAME", drop=5),
    render.Col("NODE", ident=True),
    render.Col("STATE"),
    render.Col("EXIT", drop=1),
    render.Col("STARTED", drop=4),
    render.Col("DURATION", drop=2),
    render.Col("RESTARTS", drop=6),
    render.Col("UTIL", drop=3),
    render.Col("IDLE", drop=7),
]


OneJob = Annotated[
    str | None,
    declare.Argument(
        help="Only this job (id or --name), with its environment.",
        autocompletion=complete.job_ids,
        show_default=False,
    ),
]


def jobs(
    ctx: declare.Context,
    job: OneJob = None,
    project: Project = None,
    bucket: Bucket = None,
    json_out: Json = False,
    wide: Wide = False,
    fmt: Format = None,
    filter_text: Filter = None,
    sort_by: SortBy = None,
    limit: Limit = None,
) -> None:
    """List tpuctl jobs from the bucket, newest first; or one JOB.

    Each job's id, node, state, exit status, start, duration, and the mean TensorCore
    utilisation and idle share over its life (Cloud Monitoring; `input-bound?` below
    50%). With JOB, also the job's Python environment: its key, how each worker got it
    (built, from the bucket, reused), packages, bytes moved, ready time (`--json`:
    `environment`, in every row); and a running job's chips per worker, from libtpu on
    the VM or else from Cloud Monitoring, each row naming its source (`chips`).

    Example: tpuctl jobs --filter state=FAILED --format 'value(id)'
    """
    from tpuctl.services import jobs as jobs_service
    from tpuctl.services import usage

    app = app_of(ctx)
    b = job_bucket(app, project, bucket)
    target = app.target(project, None, need_zone=False)
    one = None if job is None else [jobs_service.resolve(b, job)]
    # newest first: ids sort by their start time
    rows = jobs_service.list_jobs(b, app.factory.monitoring, target.project, one)[::-1]
    if one and not rows:
        from tpuctl.errors import NotFoundError

        raise NotFoundError(f"no job {one[0]} in gs://{b.name}/", hint="`tpuctl jobs` lists them")
    receipts: dict[str, Any] = {}
    if one:  # where its time and money went, as the end of its `run` said
        from tpuctl.services import late_receipt
        from tpuctl.wording import printable

        for r in rows:  # a detached job's is made by the first to see it ended
            receipts[r["id"]] = late_receipt.load_or_make(b, r["id"], r.get("utilization"))
            r["receipt"] = receipts[r["id"]].to_json() if receipts[r["id"]] else None
    usage_notes(rows)
    if one:  # where libtpu could not be read: Cloud Monitoring's chips (chip_metrics.py)
        from tpuctl.services import chip_metrics, records

        for r in rows:
            record = records.read_job_record(b, r["id"])
            record.setdefault("project", target.project)
            chip_metrics.add_to(r, record, app.factory.backends, app.factory.monitoring)
    from tpuctl.cli.projection import chosen

    rows = [rows[i] for i in chosen(rows, filter_text, sort_by, limit)]
    if fmt:
        render.print_format(rows, fmt)
        return
    if json_out:
        render.print_json(rows[0] if one and rows else rows)
        return
    if not rows:
        render.info("no jobs yet")
        return
    table = []
    for r in rows:
        util = "-" if r["utilization"] is None else f"{r['utilization']:.0f}%"
        if r["inputBound"]:
            util += " input-bound?"
        elif r["metricsNote"] in (usage.NO_METRICS_YET, usage.NO_SAMPLES):
            util = r["metricsNote"]
        table.append(
            [
                r["id"],
                r["name"] if r["name"] != r["id"] else "-",
                r["node"],
                r["state"] + (f" (hung {_hung_for(r)}?)" if r["hungSince"] else ""),
                "-" if r["exitStatus"] is None else str(r["exitStatus"]),
                r["created"][:19],
                render.human_age(r["duration"]),
                str(r["restarts"]),
                util,
                "-" if r["idleShare"] is None else f"{r['idleShare']:.0%}",
            ]
        )
    render.show_fitted(JOB_COLUMNS, table, wide)
    if one:
        from tpuctl.cli.chips_table import show_chips
        from tpuctl.services.run.environment import describe
        from tpuctl.wording import printable

        for r in rows:  # as at the end of `run`
            if r.get("image"):  # `run --image`: by the digest every worker ran
                sys.stdout.write(f"image: {printable(r['image'])}\n")
            if r["hungSince"]:
                name = jobs_service.worker_names(b, r["id"])
                sys.stdout.write(
                    f"no output, CPU or chip work for {_hung_for(r)} on "
                    f"{', '.join(map(name, r['hungWorkers']))}: `tpuctl stacks {r['id']}` "
                    "shows where its threads wait\n"
                )
            if r["chips"]:
                name = jobs_service.worker_names(b, r["id"])
                show_chips(r["chips"], name, r.get("chipsNote"))
            if r["environment"]:
                sys.stdout.write(printable(describe(r["environment"])) + "\n")
            if receipts.get(r["id"]) is not None:
                for line in receipts[r["id"]].lines():
                    sys.stdout.write(printable(line) + "\n")


def _hung_for(row: dict[str, Any]) -> str:
    import time

    return render.human_age(max(0.0, time.time() - float(row["hungSince"])))


def logs(
    ctx: declare.Context,
    job: JobRef,
    follow: Annotated[
        bool,
        declare.Option(
            "--follow",
            "-f",
            help="Keep printing until the job ends: live from the VMs while it runs.",
        ),
    ] = False,
    worker: Annotated[
        int | None, declare.Option("--worker", "-w", help="Only this worker.")
    ] = None,
    project: Project = None,
    bucket: Bucket = None,
) -> None:
    """Print a job's logs; with -f, follow them live.

    All workers, prefixed on pods: the bucket's copy, and with -f the live log on the
    VMs (over SSH) while the job runs.

    Example: tpuctl logs 20261129-153012-ab12cd -f
    """
    from tpuctl.services import jobs as jobs_service
    from tpuctl.services import records

    app = app_of(ctx)
    b = job_bucket(app, project, bucket)
    job = jobs_service.resolve(b, job)
    workers = int(records.read_job_record(b, job).get("workers", 1))
    name = jobs_service.worker_names(b, job)  # w3, or s1/w1 on a multislice job
    prefixed = worker is None and workers > 1
    out = _Lines(sys.stdout.buffer, name, prefixed, terminal=sys.stdout.isatty())
    if follow:
        from tpuctl.services import live_logs

        factory = app.factory
        live_logs.follow(b, factory.backends(), factory.ssh(), job, worker, out.write, render.info)
        _ended_receipt(b, job)
        return
    # a terminal gets the end of a long log; a file or a pipe gets it all
    tail = TERMINAL_TAIL if sys.stdout.isatty() else None
    _, chunks, skipped = jobs_service.read_logs(b, job, {}, worker, tail)
    for w, left_out in skipped.items():
        render.info(
            f"the first {left_out:,} bytes of {name(w)}'s log are not shown here; "
            f"`tpuctl logs {job} > FILE` writes it all"
        )
    for w, data in chunks:
        out.write(w, data)


TERMINAL_TAIL = 1 << 20  # bytes of each log's end `logs` prints to a terminal


def _ended_receipt(b: Any, job: str) -> None:
    """After following a job to its end: its receipt, on stderr (a detached job's is made
    now when nobody made it before: services/late_receipt.py)."""
    from tpuctl.services import late_receipt
    from tpuctl.wording import printable

    made = late_receipt.load_or_make(b, job)
    for line in made.lines() if made is not None else []:
        render.info(printable(f"job {job}: {line}"))


class _Lines:
    """Log bytes out, each line prefixed with its worker (`[w1] `, `[s1/w0] `) on pods; a
    line cut between two chunks gets its prefix once; on a terminal, controls other than
    colours shown as escapes."""

    def __init__(
        self, out: Any, name: Callable[[int], str], prefixed: bool, terminal: bool
    ) -> None:
        self.out, self.name, self.prefixed = out, name, prefixed
        self.mid_line: set[int] = set()
        self.terminal = terminal  # a file gets the log as it is

    def write(self, worker: int, data: bytes) -> None:
        if self.terminal:  # the log in the bucket may be anyone's: no control acts
            from tpuctl.wording import terminal_bytes

            data = terminal_bytes(data)
        if self.prefixed:
            for line in data.splitlines(keepends=True):
                if worker not in self.mid_line:
                    self.out.write(f"[{self.name(worker)}] ".encode())
                self.out.write(line)
                if line.endswith(b"\n"):
                    self.mid_line.discard(worker)
                else:
                    self.mid_line.add(worker)
        else:
            self.out.write(data)
        self.out.flush()


def cancel(
    ctx: declare.Context,
    job: JobRef,
    project: Project = None,
    bucket: Bucket = None,
) -> None:
    """Stop a job on every worker.

    Its node is torn down if the job was started with teardown.

    Example: tpuctl cancel 20261129-153012-ab12cd
    """
    from tpuctl.services import jobs as jobs_service

    b = job_bucket(app_of(ctx), project, bucket)
    job = jobs_service.resolve(b, job)
    done = jobs_service.cancel(b, job)
    if done.state in jobs_service.FINAL:
        later = "; a restart of it will not start" if done.marked else ""
        render.info(f"job {job} is already {done.state}: nothing to stop{later}")
    elif done.asked == 0:
        node = "the node made for it is deleted" if done.teardown else "its node is kept"
        render.info(
            f"job {job} is {done.state}: cancelled before it started, its script "
            f"will not run; {node}"
        )
    else:
        render.info(f"asked {done.asked} worker(s) to stop job {job} ({done.state})")


def outputs(
    ctx: declare.Context,
    job: JobRef,
    dest: Annotated[
        Path | None,
        declare.Argument(help="Folder to download into (default outputs/JOB).", show_default=False),
    ] = None,
    project: Project = None,
    bucket: Bucket = None,
    unverified: Annotated[
        bool,
        declare.Option(
            "--unverified",
            help="Download every file in the job's outputs folder, also those no agent of "
            "the job uploaded (anyone who can write the bucket may have put them there).",
        ),
    ] = False,
) -> None:
    """Download a job's outputs from the bucket.

    Only the files the job's own agents uploaded, as their manifests signed with this
    machine's key say (TPUCTL_SIGNING_KEY for a job run from another machine).

    Example: tpuctl outputs 20261129-153012-ab12cd runs/first
    """
    from tpuctl.agent import protocol
    from tpuctl.services import jobs as jobs_service
    from tpuctl.services import outputs as outputs_service
    from tpuctl.services.run import signing
    from tpuctl.services.run.request import DEFAULT_OUTPUTS

    b = job_bucket(app_of(ctx), project, bucket)
    job = jobs_service.resolve(b, job)
    target = dest if dest is not None else Path(DEFAULT_OUTPUTS) / job
    key = "" if unverified else signing.key()
    brought = outputs_service.download(b, job, target, key, verify=not unverified)
    for line in brought.notes(f"gs://{b.name}/{protocol.outputs_prefix(job)}"):
        render.info(line)
    if brought.written:
        render.info(f"downloaded {len(brought.written)} output file(s) of job {job} to {target}")
    elif not (brought.unnamed or brought.changed):
        render.info(f"job {job} has no outputs in gs://{b.name}/ (yet)")


def stacks(
    ctx: declare.Context,
    job: JobRef,
    worker: Annotated[
        int | None, declare.Option("--worker", "-w", help="Only this worker.")
    ] = None,
    project: Project = None,
    bucket: Bucket = None,
) -> None:
    """Show a running job's Python stacks on every worker.

    Workers with the same stacks are shown once; a worker whose stacks differ is called
    out (in a hang, often the one the others wait for). py-spy's dump where the VM has
    it (native frames too), else Python's faulthandler. Kept in the bucket under
    the job's stacks/ folder.

    Example: tpuctl stacks 20261129-153012-ab12cd
    """
    from tpuctl.services import jobs as jobs_service
    from tpuctl.services import stacks as stacks_service

    app = app_of(ctx)
    b = job_bucket(app, project, bucket)
    job = jobs_service.resolve(b, job)
    factory = app.factory
    taken = stacks_service.take(b, factory.backends(), factory.ssh(), job, worker)
    name = jobs_service.worker_names(b, job)
    for w, why in sorted(taken.missing.items()):
        render.info(f"{name(w)}: no stacks: {why}")
    for w, why in sorted(taken.notes.items()):
        render.info(f"{name(w)}: {why}")
    if not taken.stacks:
        from tpuctl.errors import TpuctlError

        raise TpuctlError(f"no worker of job {job} gave its stacks")
    groups = stacks_service.grouped(taken.stacks)
    count = len(taken.stacks)
    for workers, text in groups:
        who = ", ".join(name(w) for w in workers)
        if len(groups) == 1:
            head = f"all {count} workers have these stacks" if count > 1 else who
        elif len(workers) == 1 and len(groups[0][0]) > 1:
            head = f"{who} DIFFERS from the others"
        else:
            head = f"{who} ({len(workers)} of {count})"
        sys.stdout.write(f"=== {head}:\n{text}\n")
    render.info(f"kept in gs://{b.name}/{stacks_service.folder(job, taken.stamp)}")
