"""tpuctl jobs / logs JOB / cancel JOB: jobs as the bucket records them."""

from __future__ import annotations

import sys
import time
from typing import Annotated, Any

import typer

from tpuctl.cli import render
from tpuctl.cli.options import AppEnv, JobRef, Json, Project, app_of

Bucket = Annotated[
    str | None, typer.Option("--bucket", help="gs://BUCKET (default gs://PROJECT-tpuctl).")
]


def _bucket(app: AppEnv, project: str | None, bucket: str | None) -> Any:
    from tpuctl.config import load_config_file
    from tpuctl.services import staging

    target = app.target(project, None, need_zone=False)
    name = staging.bucket_name(bucket, load_config_file(), target.project)
    return app.factory.bucket(name, target.project)


def jobs(
    ctx: typer.Context, project: Project = None, bucket: Bucket = None, json_out: Json = False
) -> None:
    """List tpuctl jobs from the bucket: id, node, state, exit status, started, duration.

    Example: tpuctl jobs --json
    """
    from tpuctl.services import jobs as jobs_service

    rows = jobs_service.list_jobs(_bucket(app_of(ctx), project, bucket))
    if json_out:
        render.print_json(rows)
        return
    if not rows:
        render.info("no jobs yet")
        return
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("JOB", "NAME", "NODE", "STATE", "EXIT", "STARTED", "DURATION", "RESTARTS"):
        table.add_column(col, no_wrap=True)
    for r in rows:
        table.add_row(
            r["id"],
            r["name"] if r["name"] != r["id"] else "-",
            r["node"],
            r["state"],
            "-" if r["exitStatus"] is None else str(r["exitStatus"]),
            r["created"][:19],
            render.human_age(r["duration"]),
            str(r["restarts"]),
        )
    render.show(table)


def logs(
    ctx: typer.Context,
    job: JobRef,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing until it ends.")
    ] = False,
    worker: Annotated[int | None, typer.Option("--worker", "-w", help="Only this worker.")] = None,
    project: Project = None,
    bucket: Bucket = None,
) -> None:
    """Print a job's logs (all workers, prefixed on pods) from the bucket.

    Example: tpuctl logs 20261129-153012-ab12cd -f
    """
    from tpuctl.services import jobs as jobs_service

    b = _bucket(app_of(ctx), project, bucket)
    job = jobs_service.resolve(b, job)
    offsets: dict[int, int] = {}
    name = jobs_service.worker_names(b, job)
    out = sys.stdout.buffer
    while True:
        state, chunks = jobs_service.read_logs(b, job, offsets, worker)
        prefix = len({w for w, _ in chunks} | set(offsets)) > 1
        for w, data in chunks:
            for line in data.splitlines(keepends=True):
                out.write((f"[{name(w)}] ".encode() if prefix else b"") + line)
        out.flush()
        if not follow or state in jobs_service.FINAL:
            return
        time.sleep(2.0)


def cancel(
    ctx: typer.Context,
    job: JobRef,
    project: Project = None,
    bucket: Bucket = None,
) -> None:
    """Stop a job on every worker (its node is torn down if the job was started with teardown).

    Example: tpuctl cancel 20261129-153012-ab12cd
    """
    from tpuctl.services import jobs as jobs_service

    b = _bucket(app_of(ctx), project, bucket)
    job = jobs_service.resolve(b, job)
    state, count = jobs_service.cancel(b, job)
    if state in jobs_service.FINAL:
        render.info(f"job {job} is already {state}: nothing to stop")
    elif count == 0:
        render.info(f"job {job} is {state}: no agent has started it yet, nothing to stop")
    else:
        render.info(f"asked {count} worker(s) to stop job {job} ({state})")
