"""tpuctl run SCRIPT [-- ARGS...]: the main job."""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import time
from contextlib import AbstractContextManager
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tpuctl import catalog, interrupts
from tpuctl.catalog import DEFAULT_ACCELERATOR
from tpuctl.cli import checkup, render
from tpuctl.cli.options import Accelerator, Json, Project, Zones, app_of
from tpuctl.errors import Interrupted, JobFailed, UsageError
from tpuctl.services.run.spec import MIN_SYNC_EVERY, parse_env, states_summary, worker_label

if TYPE_CHECKING:
    from tpuctl.services.run.jobfile import JobFile


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


_GIVEN = ("COMMANDLINE", "ENVIRONMENT", "PROMPT")  # click's ParameterSource names


def _given(ctx: typer.Context, param: str) -> bool:
    """Whether the user gave this parameter (not its default), as click knows it."""
    source = ctx.get_parameter_source(param)
    return source is not None and source.name in _GIVEN


def _merged(ctx: typer.Context, file: Path | None) -> tuple[Any, JobFile | None, set[str]]:
    """run()'s parameters with a job file's values under the flags the user gave; the
    file, and the keys it gave."""
    from tpuctl.services.run import jobfile

    params = dict(ctx.params)
    if file is None:
        return SimpleNamespace(**params), None, set()
    job_file = jobfile.load(file)
    used = jobfile.merge(params, {n for n in params if _given(ctx, n)}, job_file)
    return SimpleNamespace(**params), job_file, used


def _print_spec(
    ctx: typer.Context, o: Any, from_file: set[str], script: Path, restarts: int
) -> None:
    """The job file for what was given (flags, and the file read with -f) on stdout."""
    from tpuctl.services.run import jobfile

    given = {n for n in vars(o) if _given(ctx, n)}
    text = jobfile.spec_text(vars(o), given, from_file, script, restarts)
    sys.stdout.buffer.write(text.encode("utf-8"))
    sys.stdout.buffer.flush()


def locate(script: str, workdir: Path | None) -> tuple[Path, str]:
    """(work dir, script path relative to it)."""
    path = Path(script)
    if workdir is None:
        if not path.is_file():
            raise UsageError(f"script {script} not found", hint="give the path to a file")
        return path.resolve().parent, path.name
    root = workdir.resolve()
    if not root.is_dir():
        raise UsageError(f"--workdir {workdir} is not a folder")
    for candidate in (path.resolve(), (root / path).resolve()):
        if candidate.is_file() and candidate.is_relative_to(root):
            return root, candidate.relative_to(root).as_posix()
    raise UsageError(f"script {script} is not a file inside the work dir {root}")


def _left(runner: Any, zone: str) -> str:
    """What becomes of the node, said only as far as it is known."""
    job = runner.job
    node = f"{job.what} in {zone}"
    if job.node_deleted:
        return f"{node} was deleted"
    if not job.spec.teardown:
        return f"{node} keeps running"
    if job.agents_started and 0 not in job.lost:
        return f"{node} will be deleted by its agent when the job ends"
    return f"{node} may still be billing"


def _usage(app: Any, runner: Any, project: str, outcome: Any, began: float) -> Any:
    """The job's TensorCore use over its life (services/usage.py), when it started."""
    from tpuctl.services import jobs, usage

    bucket = runner.bucket
    if not outcome.started or bucket is None:
        return None
    return usage.for_job(lambda: jobs.statuses(bucket, outcome.job_id), app.factory.monitoring,
                         project, runner.zone, runner.job.slice_ids, began)  # fmt: skip


def _stop(runner: Any, ui: CliUI, zone: str) -> None:
    """After a Ctrl-C (SIGTERM, SIGHUP): stop what runs, then say what is left; always
    an `Interrupted` (exit 130), a second Ctrl-C included."""
    job = runner.job
    hint = (
        f"`tpuctl cancel {runner.job_id}` stops it; "
        f"`tpuctl delete {runner.node_name} --zone {zone}` deletes the node"
    )
    try:
        ui.flush()
        stopped = runner.stop()
    except KeyboardInterrupt:
        if not job.agents_started:
            raise Interrupted(f"left at once; {_left(runner, zone)}", hint=hint) from None
        raise Interrupted(
            f"left at once: job {runner.job_id} may still run; {_left(runner, zone)}", hint=hint
        ) from None
    if not stopped.started:
        what = _left(runner, zone) if job.created else "no node was created"
        raise Interrupted(f"interrupted before job {runner.job_id} started; {what}") from None
    what = "every slice" if job.multislice else "its node"
    gone = f" and deleted {what}" if stopped.torn_down else ""
    raise Interrupted(f"interrupted: stopped job {runner.job_id}{gone}") from None


def run(
    ctx: typer.Context,
    script: Annotated[
        str | None,
        typer.Argument(
            help="A .py file (run with python3) or an executable (or `script` in -f FILE).",
            show_default=False,
        ),
    ] = None,
    script_args: Annotated[
        list[str] | None, typer.Argument(help="Arguments for the script, after --.")
    ] = None,
    node: Annotated[str | None, typer.Option("--node", help="Use (or create) this node.")] = None,
    accelerator: Accelerator = DEFAULT_ACCELERATOR,
    version: Annotated[str | None, typer.Option("--version", help="Runtime version.")] = None,
    spot: Annotated[bool, typer.Option("--spot", help="Spot capacity.")] = False,
    service_account: Annotated[
        str | None,
        typer.Option(
            "--service-account",
            help="A new node's service account (default: the project's default compute "
            "account); it must be able to write the bucket and delete the node.",
        ),
    ] = None,
    scopes: Annotated[
        list[str],
        typer.Option("--scopes", help="A new node's OAuth scopes: a,b (default cloud-platform)."),
    ] = [],  # noqa: B006
    workdir: Annotated[
        Path | None, typer.Option("--workdir", help="Folder to ship (default: the script's).")
    ] = None,
    exclude: Annotated[
        list[str], typer.Option("--exclude", help="gitignore-style; repeatable.")
    ] = [],  # noqa: B006
    bucket: Annotated[
        str | None, typer.Option("--bucket", help="gs://BUCKET (default gs://PROJECT-tpuctl).")
    ] = None,
    env_pairs: Annotated[
        list[str], typer.Option("--env", help="KEY=VALUE for the script; repeatable.")
    ] = [],  # noqa: B006
    env_file: Annotated[
        list[Path], typer.Option("--env-file", help="KEY=VALUE lines; repeatable.")
    ] = [],  # noqa: B006
    setup: Annotated[
        str | None, typer.Option("--setup", help="Shell command run once per worker first.")
    ] = None,
    outputs: Annotated[
        Path | None, typer.Option("--outputs", help="Download outputs here at the end.")
    ] = None,
    teardown: Annotated[
        bool | None,
        typer.Option(
            "--teardown/--keep",
            help="Delete the node at the end (default: only a node created for the job).",
        ),
    ] = None,
    detach: Annotated[bool, typer.Option("--detach", help="Return once the job started.")] = False,
    name: Annotated[str | None, typer.Option("--name", help="A name for the job.")] = None,
    ttl: Annotated[
        str | None, typer.Option("--ttl", help="Node expiry for `tpuctl gc` (default 7d).")
    ] = None,
    start_deadline: Annotated[
        str | None,
        typer.Option(
            "--start-deadline",
            help="A node made for the job deletes itself when its agents have not started "
            "by then (default 10m).",
        ),
    ] = None,
    queued_flag: Annotated[
        bool, typer.Option("--queued", help="Ask for the node through a queued resource.")
    ] = False,
    slices: Annotated[
        int,
        typer.Option(
            "--slices",
            help="Multislice: run on this many slices of the accelerator, through one "
            "queued resource (docs/multislice.md).",
        ),
    ] = 1,
    valid_until: Annotated[
        str | None, typer.Option("--valid-until", help="With --queued: give up waiting after this.")
    ] = None,
    restarts: Annotated[
        int | None,
        typer.Option(
            "--restarts",
            min=0,
            help="Recreate the node and restart after a preemption at most N times "
            "(default: 3 with --spot, else 0).",
        ),
    ] = None,
    retry_on_failure: Annotated[
        bool, typer.Option("--retry-on-failure", help="A failed script counts as restartable.")
    ] = False,
    sync_every: Annotated[
        float,
        typer.Option(
            "--sync-every", min=MIN_SYNC_EVERY, help="Seconds between output uploads (checkpoints)."
        ),
    ] = 30.0,
    force: Annotated[
        bool, typer.Option("--force", help="Run even when `tpuctl doctor` finds errors.")
    ] = False,
    no_check: Annotated[
        bool, typer.Option("--no-check", help="Skip the `tpuctl doctor` check of the script.")
    ] = False,
    heartbeat_deadline: Annotated[
        str | None,
        typer.Option(
            "--heartbeat-deadline",
            help="An agent silent this long is lost: the job ends (default 60s).",
        ),
    ] = None,
    zone: Zones = None,
    project: Project = None,
    json_out: Json = False,
    file: Annotated[
        Path | None,
        typer.Option("--file", "-f", help="A job file (TOML) with these options; flags given win."),
    ] = None,
    print_spec: Annotated[
        bool,
        typer.Option("--print-spec", help="Print the job file for these flags and exit."),
    ] = False,
) -> None:
    """Run a script on a TPU VM: stage it, run it on every worker, stream logs, tear down.

    Example: tpuctl run examples/train.py --accelerator v3-8 --outputs out/ -- --steps 200
    """
    from tpuctl.config import configured_service_account, load_config_file
    from tpuctl.durations import parse_duration
    from tpuctl.services import nodes, staging
    from tpuctl.services.run import jobfile
    from tpuctl.services.run.runner import Adapters, Runner, RunSpec
    from tpuctl.services.run.spec import HEARTBEAT_DEADLINE, START_DEADLINE

    o, job_file, from_file = _merged(ctx, file)
    blame = job_file.blame if job_file else lambda key: contextlib.nullcontext()
    if o.script is None:
        raise UsageError(
            "no script: give one (tpuctl run SCRIPT) or a job file with `script = ...` (-f FILE)"
        )
    with blame("slices") if "slices" in from_file else contextlib.nullcontext():
        if o.slices < 1:
            raise UsageError(f"--slices must be 1 or more, not {o.slices}")
        if o.slices > 1 and o.node:
            raise UsageError("--slices asks for new slices: it does not go with --node")
    queued = o.queued_flag or o.slices > 1  # a multislice job is one queued resource
    if o.valid_until and not queued:
        raise UsageError("--valid-until needs --queued")
    if o.queued_flag and o.node:
        raise UsageError("--queued asks for a new node: it does not go with --node")
    with blame("script" if "script" in from_file else "workdir"):
        root, rel = locate(str(o.script), o.workdir)
    env = parse_env(o.env_pairs, o.env_file)
    durations = {
        key: parse_duration(getattr(o, key), f"--{key.replace('_', '-')}")
        for key in ("ttl", "valid_until", "start_deadline", "heartbeat_deadline")
        if getattr(o, key)
    }
    restarts = (3 if o.spot else 0) if o.restarts is None else o.restarts
    shape = catalog.shape(o.accelerator)
    if print_spec:
        # the script as it was named (a symlinked folder stays as typed), else as found
        named = Path(str(o.script))
        _print_spec(ctx, o, from_file, named if named.is_file() else root / rel, restarts)
        return
    if not o.no_check:  # before anything is created: a mistake found here costs no TPU time
        from tpuctl.frameworks import runtime_of

        known = shape if shape.known else None
        runtime = None if o.node else runtime_of(o.version, known)
        checkup.gate(root, rel, shape, o.force, runtime, o.setup)
    spec = RunSpec(
        script=rel,
        workdir=root,
        args=list(o.script_args or []),
        node=o.node,
        shape=shape,
        version=o.version,
        spot=o.spot,
        service_account=o.service_account or configured_service_account(),
        scopes=nodes.parse_scopes(list(o.scopes or [])),
        excludes=list(o.exclude),
        bucket=o.bucket,
        env=env,
        setup=o.setup,
        outputs=o.outputs,
        teardown=None if o.teardown is None and o.node else o.teardown is not False,
        detach=o.detach,
        name=o.name,
        ttl=durations.get("ttl"),
        queued=queued,
        slices=o.slices,
        valid_until=durations.get("valid_until"),
        restarts=restarts,
        retry_on_failure=o.retry_on_failure,
        sync_every=o.sync_every,
        start_deadline=durations.get("start_deadline", START_DEADLINE),
        heartbeat_deadline=durations.get("heartbeat_deadline", HEARTBEAT_DEADLINE),
    )
    node, zone, project, bucket, json_out = o.node, o.zone, o.project, o.bucket, o.json_out
    app = app_of(ctx)
    target = app.target(project, zone, many_zones=True)
    if node and len(target.candidates) > 1:
        if target.zone_source == "--zone":
            raise UsageError("--node names a node in one zone: give one --zone with it")
        target = dataclasses.replace(target, zones=())
    # --bucket, else the config file's `bucket`, else the default: as `jobs` finds it.
    spec.bucket = staging.bucket_name(bucket, load_config_file(), target.project)
    factory = app.factory
    adapters = Adapters(
        tpu=factory.tpu(),
        ssh=factory.ssh(),
        bucket=lambda b: factory.bucket(b, target.project),
        quotas=factory.quotas(),
    )
    if job_file is not None:
        jobfile.check_offered(adapters.tpu, target, job_file, from_file, spec)
    ui = CliUI(logs_to_stderr=json_out)
    runner = Runner(adapters, target, spec, ui)

    replaced = interrupts.install()  # SIGINT, SIGTERM, SIGHUP alike, until the end
    began = time.time()
    try:
        try:
            outcome = runner.run()
        except KeyboardInterrupt:
            _stop(runner, ui, runner.zone)
    finally:
        interrupts.restore(replaced)
    ui.flush()
    where = f"gs://{runner.bucket.name if runner.bucket else '?'}/tpuctl/jobs/{outcome.job_id}/"
    if spec.detach:
        if json_out:
            render.print_json(
                {"job": outcome.job_id, "node": outcome.node, "zone": runner.zone, "bucket": where}
            )
        else:
            left = _left(runner, runner.zone)
            render.info(f"job {outcome.job_id} started on {outcome.node}; {left}")
            render.info(f"follow it: tpuctl logs {outcome.job_id} -f")
        return
    workers = runner.job.workers
    summary = states_summary(outcome.states, workers, spec.slices)
    restarted = f" after {outcome.restarts} restart(s)" if outcome.restarts else ""
    render.info(f"job {outcome.job_id}: {summary}{restarted}; exit status {outcome.exit_status}")
    used = _usage(app, runner, target.project, outcome, began)
    if used is not None:
        render.info(f"job {outcome.job_id}: {used.describe()}")
    render.info(f"logs and outputs: {where}")
    if outcome.outputs:
        render.info(f"downloaded {len(outcome.outputs)} output file(s) to {spec.outputs}")
    if outcome.torn_down:
        render.info(f"deleted {runner.job.what}")
    elif not spec.teardown and not runner.job.node_deleted:
        render.info(
            f"{_left(runner, runner.zone)}: `tpuctl delete {outcome.node} --zone {runner.zone}`"
            " when done"
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
                **(used.to_json() if used is not None else {}),
            }
        )
    if outcome.message:
        raise JobFailed(outcome.message, hint=f"see `tpuctl logs {outcome.job_id}`")
    if outcome.exit_status:
        raise typer.Exit(outcome.exit_status)
