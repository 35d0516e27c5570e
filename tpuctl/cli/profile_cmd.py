"""tpuctl profile JOB: a profile of a running JAX or TensorFlow job, brought home."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Annotated

from tpuctl.cli import declare, render
from tpuctl.cli.jobs import Bucket, job_bucket
from tpuctl.cli.options import JobRef, Json, Project, app_of
from tpuctl.errors import TpuctlError, UsageError

PROFILE_DIR = "profile"  # under the job's home folder: outputs/<job>/profile


def seconds_of(text: str, most: float) -> float:
    """--seconds as a number; UsageError (exit 2) naming what is allowed."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= most:  # (nan compares false)
        raise UsageError(
            f"invalid --seconds {text[:40]!r}: a number of seconds above 0, at most {most:g}"
        )
    return value


def profile(
    ctx: declare.Context,
    job: JobRef,
    seconds: Annotated[
        str, declare.Option("--seconds", "-s", help="How long to trace, in seconds (at most 300).")
    ] = "3",
    dest: Annotated[
        Path | None,
        declare.Option(
            "--dest",
            metavar="DIR",
            help="Folder to bring the profile to (default outputs/JOB/profile).",
            show_default=False,
        ),
    ] = None,
    worker: Annotated[
        int | None, declare.Option("--worker", "-w", help="Only this worker.")
    ] = None,
    project: Project = None,
    bucket: Bucket = None,
    json_out: Json = False,
) -> None:
    """Profile a running JAX or TensorFlow job on every worker at once.

    Each process of the job that imported jax or tensorflow traces itself with its
    framework's profiler for --seconds, all workers starting together. The traces are
    kept in the bucket under the job's profile/ folder and brought home, checked, in
    the layout XProf and TensorBoard read; the command that opens them is printed.

    With --json, stdout is one object: each trace's worker, file, size and sha256,
    what stayed in the bucket and why, and the command that opens them.

    Example: tpuctl profile 20261129-153012-ab12cd --seconds 5
    """
    from tpuctl.agent import protocol
    from tpuctl.services import jobs as jobs_service
    from tpuctl.services import profile as profile_service
    from tpuctl.services.run.request import DEFAULT_OUTPUTS

    length = seconds_of(seconds, profile_service.MOST_SECONDS)
    app = app_of(ctx)
    b = job_bucket(app, project, bucket)
    job = jobs_service.resolve(b, job)
    factory = app.factory
    taken = profile_service.take(
        b, factory.backends(), factory.ssh(), job, length, worker, say=render.info
    )
    name = jobs_service.worker_names(b, job)
    for w, lines in sorted(taken.notes.items()):
        for line in lines if w not in taken.missing else []:
            render.info(f"{name(w)}: {line}")
    reasons = set(taken.missing.values())
    if not taken.traces and reasons == {protocol.NO_PROFILER}:
        raise TpuctlError(
            f"no process of job {job} has imported jax or tensorflow: there is nothing to "
            f"profile (`tpuctl stacks {job}` shows where any Python script is)"
        )
    for w, why in sorted(taken.missing.items()):
        render.info(f"{name(w)}: no profile: {why}")
    if not taken.traces:
        raise TpuctlError(f"no worker of job {job} gave a profile")
    folder = dest if dest is not None else Path(DEFAULT_OUTPUTS) / job / PROFILE_DIR
    home = profile_service.bring_home(b, job, taken, folder)
    for trace_name, why in sorted(home.refused.items()):
        render.info(f"{trace_name}: not brought home: {why}")
    where = f"gs://{b.name}/{protocol.job_path(job, 'profile', taken.stamp)}/"
    if not home.written:
        raise TpuctlError(f"no trace of job {job} came home (they are in {where})")
    frameworks = ", ".join(sorted({t.framework for t in taken.traces}))
    workers = sorted({t.worker for t in taken.traces})
    began = [t.began for t in taken.traces]
    together = f", started within {max(began) - min(began):.2f}s" if len(began) > 1 else ""
    render.info(
        f"{len(home.written)} trace(s) of {len(workers)} worker(s) ({frameworks}, "
        f"{length:g}s{together}) in {folder}/plugins/profile/{taken.stamp}/; kept in {where}"
    )
    command = f"xprof server --logdir {folder}"
    if json_out:
        came = {path.name: path for path in home.written}
        render.print_json(
            {
                "job": job,
                "stamp": taken.stamp,
                "seconds": length,
                "logdir": str(folder),
                "bucket": where,
                "command": command,
                "traces": [
                    {
                        "worker": t.worker,
                        "framework": t.framework,
                        "bytes": t.size,
                        "sha256": t.sha256,
                        "began": t.began,
                        "file": str(came[f"{t.name}.xplane.pb"]),
                    }
                    for t in taken.traces
                    if f"{t.name}.xplane.pb" in came
                ],
                "refused": home.refused,
                "missing": {str(w): why for w, why in sorted(taken.missing.items())},
            }
        )
        return
    render.info("open them with (pip install xprof):")
    sys.stdout.write(command + "\n")
