"""tpuctl run SCRIPT [-- ARGS...]: the main job."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tpuctl import interrupts, redact
from tpuctl.catalog import DEFAULT_ACCELERATOR
from tpuctl.cli import doctor_gate, render
from tpuctl.cli import node_options as opt
from tpuctl.cli.options import (
    Accelerator,
    Json,
    Project,
    RunApi,
    Zones,
    app_of,
    seconds,
    whole_number,
)
from tpuctl.errors import TpuctlError
from tpuctl.services.run.request import MAX_RESTARTS
from tpuctl.services.run.spec import MIN_SYNC_EVERY

if TYPE_CHECKING:
    from tpuctl.services.run.jobfile import JobFile


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
    api: RunApi = None,
    version: opt.Version = None,
    spot: opt.Spot = False,
    preemptible: opt.Preemptible = False,
    reserved: opt.Reserved = False,
    reservation: opt.Reservation = None,
    labels: opt.Labels = [],  # noqa: B006
    network: opt.Network = None,
    subnetwork: opt.Subnetwork = None,
    tags: opt.Tags = [],  # noqa: B006
    internal_ip_only: opt.InternalIpOnly = False,
    service_account: opt.ServiceAccount = None,
    scopes: opt.Scopes = [],  # noqa: B006
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
    requirements: Annotated[
        Path | None,
        typer.Option(
            "--requirements",
            help="Requirements (requirements.txt, a lock file, pyproject.toml, uv.lock) "
            "built once, cached in the bucket, installed in a venv on every worker "
            "(default: the work dir's requirements.txt, if any).",
        ),
    ] = None,
    no_requirements: Annotated[
        bool,
        typer.Option("--no-requirements", help="No environment, even with a requirements.txt."),
    ] = False,
    rebuild_env: Annotated[
        bool, typer.Option("--rebuild-env", help="Resolve and build the environment again.")
    ] = False,
    system_site_packages: Annotated[
        bool,
        typer.Option(
            "--system-site-packages", help="The venv sees the image's packages (e.g. its jax)."
        ),
    ] = False,
    outputs: Annotated[
        Path | None,
        typer.Option("--outputs", help="Download outputs here at the end (default outputs/JOB)."),
    ] = None,
    no_outputs: Annotated[
        bool, typer.Option("--no-outputs", help="Leave the outputs in the bucket only.")
    ] = False,
    teardown: Annotated[
        bool | None,
        typer.Option(
            "--teardown/--keep",
            help="Delete the node at the end (default: only a node created for the job).",
        ),
    ] = None,
    detach: Annotated[bool, typer.Option("--detach", help="Return once the job started.")] = False,
    name: Annotated[str | None, typer.Option("--name", help="A name for the job.")] = None,
    ttl: opt.Ttl = None,
    max_cost: opt.MaxCost = None,
    start_deadline: Annotated[
        str | None,
        typer.Option(
            "--start-deadline",
            help="A node made for the job deletes itself when its agents have not started "
            "by then and its client never renewed its lease (default 10m).",
        ),
    ] = None,
    start_lease: Annotated[
        str | None,
        typer.Option(
            "--start-lease",
            help="Until the agents start, the client renews a lease this long; a node made "
            "for the job whose client stopped renewing deletes itself (default 90s, at most 1h).",
        ),
    ] = None,
    queued_flag: opt.Queued = False,
    slices: opt.Slices = 1,
    valid_until: opt.ValidUntil = None,
    flex_start: opt.FlexStart = False,
    max_run_duration: opt.MaxRunDuration = None,
    restarts: Annotated[
        int | None,
        typer.Option(
            "--restarts",
            parser=whole_number("--restarts", 0, MAX_RESTARTS),
            show_default=False,
            help="Recreate the node and restart after a preemption at most N times "
            "(default: 3 with --spot, else 0).",
        ),
    ] = None,
    repairs: Annotated[
        int,
        typer.Option(
            "--repairs",
            parser=whole_number("--repairs", 0, MAX_RESTARTS),
            show_default=False,
            help="Replace a node whose TPU does not come up, and resume, at most N times "
            "(default 1).",
        ),
    ] = 1,
    retry_on_failure: Annotated[
        bool, typer.Option("--retry-on-failure", help="A failed script counts as restartable.")
    ] = False,
    sync_every: Annotated[
        float,
        typer.Option(
            "--sync-every",
            parser=seconds("--sync-every", MIN_SYNC_EVERY),
            show_default=False,
            help="Time between output uploads (checkpoints), e.g. 5m (default 30s).",
        ),
    ] = 30.0,
    hang_after: Annotated[
        float | None,
        typer.Option(
            "--hang-after",
            parser=seconds("--hang-after"),
            show_default=False,
            help="No output and idle chips this long is reported as a hang (default 10m; 0: off).",
        ),
    ] = None,
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
    """Run a script on a TPU VM: stage, run, stream logs, tear down.

    The script runs on every worker of the node.

    Example: tpuctl run examples/train.py --accelerator v3-8 --outputs out/ -- --steps 200
    """
    from tpuctl.cli.run_file import merged
    from tpuctl.cli.run_ui import failed_json

    o, job_file, from_file = merged(ctx, file)
    made: list[Any] = []  # the job's runner, once there is one
    try:
        ending = _run(ctx, o, job_file, from_file, made)
    except TpuctlError as e:
        if o.json_out and not o.print_spec:
            failed_json(made[0] if made else None, e)
        raise
    if isinstance(ending, TpuctlError):
        raise ending
    if ending:
        raise typer.Exit(ending)


def _run(
    ctx: typer.Context, o: Any, job_file: JobFile | None, from_file: set[str], made: list[Any]
) -> TpuctlError | int:
    """The job, from its flags to its end: what tpuctl exits with."""
    from tpuctl.cli.run_file import write_spec
    from tpuctl.cli.run_ui import CliUI, report
    from tpuctl.config import configured_service_account, load_config_file
    from tpuctl.services import nodes, staging
    from tpuctl.services.run import jobfile
    from tpuctl.services.run import request as run_request
    from tpuctl.services.run.runner import Adapters, Runner

    blame = job_file.blame if job_file else run_request.no_blame
    request = run_request.RunRequest.of(vars(o))
    request.check(blame, from_file)
    root, rel = request.located(blame, from_file)
    spec = request.spec(root, rel, configured_service_account())
    redact.secret(spec.env.values())  # never in the --debug trace
    if o.print_spec:
        # the script as it was named (a symlinked folder stays as typed), else as found
        named = Path(str(o.script))
        shown = named if named.is_file() else root / rel
        write_spec(ctx, o, from_file, shown, request.restarts_or_default)
        return 0
    nodes.check_scheduling(spec.node_spec)  # before anything is staged or made
    from tpuctl.services.names import owner_label

    account = app_of(ctx).factory.required_account("the node's owner label (tpuctl-owner)")
    spec.node_spec.owner = owner_label(account)  # who gc says it is
    if spec.environment_by_default:
        render.info(
            "environment: the work dir's requirements.txt, built once and cached in the "
            "bucket (--no-requirements: none)"
        )
    if not o.no_check:  # before anything is created: a mistake found here costs no TPU time
        doctor_gate.gate_run(root, rel, spec, o.force)
    app, json_out = app_of(ctx), o.json_out
    target = request.place(app.target(o.project, o.zone, many_zones=True))
    # --bucket, else the config file's `bucket`, else the default: as `jobs` finds it.
    config = load_config_file()
    spec.bucket = staging.bucket_name(o.bucket, config, target.project)
    spec.bucket_named_by = staging.bucket_source(o.bucket, config, target.project)
    factory = app.factory
    backend = _backend(factory, spec, config, target)
    # flex-start on the Cloud TPU API is a queued resource's; on Compute Engine, a VM's
    spec.queued = spec.queued or (spec.flex_start and backend.kind.queues_flex_start)
    adapters = Adapters(
        backend=backend,
        others=_others(factory, spec, backend),
        ssh=factory.ssh(),
        bucket=lambda b: factory.bucket(b, target.project),
        project_number=factory.iam().project_number,
        quotas=factory.quotas(),
    )
    if job_file is not None:
        jobfile.check_offered(adapters.backend, target, job_file, from_file, spec)
    ui = CliUI(logs_to_stderr=json_out)
    runner = Runner(adapters, target, spec, ui)
    made.append(runner)

    replaced = interrupts.install()  # SIGINT, SIGTERM, SIGHUP alike, until the end
    began = time.time()
    try:
        try:
            outcome = runner.run()
        except KeyboardInterrupt:
            raise run_request.stop(runner, runner.zone, ui.flush) from None
        except TpuctlError as e:  # after the job started, its outputs may be in the bucket
            if runner.job.ran and not runner.job.outputs_home:
                fetch = run_request.fetch_outputs(runner.job_id)
                e.hint = f"{e.hint}; {fetch}" if e.hint else fetch
            raise
    finally:
        interrupts.restore(replaced)
    ui.flush()
    return report(app, runner, outcome, began, json_out)


def _backend(factory: Any, spec: Any, config: Any, target: Any) -> Any:
    """The API the job's node is on: --api (or the job file's `api`); else, for --node, the
    API that has that node; else the one a create of the accelerator would choose."""
    from tpuctl.cloud import registry
    from tpuctl.errors import NotFoundError
    from tpuctl.services import create as create_service
    from tpuctl.services.lookup import find_node

    asked = None if registry.is_auto(spec.api) else spec.api
    if spec.node and not asked:
        try:
            return find_node(factory.backends(), f"{target.parent}/nodes/{spec.node}")[0]
        except NotFoundError:
            pass  # to be created, as the accelerator chooses
    return factory.backend(create_service.choose_api(spec.shape, asked, config))


def _others(factory: Any, spec: Any, backend: Any) -> tuple[Any, ...]:
    """With --api auto, every other API that offers the accelerator, tried after
    `backend` in each zone (none for an existing --node or an unknown accelerator)."""
    from tpuctl.cloud import registry

    if not registry.is_auto(spec.api) or spec.node or not spec.shape.known:
        return ()
    return tuple(k.build(factory) for k in registry.offering(spec.shape) if k is not backend.kind)
