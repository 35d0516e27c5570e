"""tpuctl run SCRIPT [-- ARGS...]: the main job."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tpuctl import interrupts, redact
from tpuctl.cli import declare, doctor_gate, render
from tpuctl.cli.options import app_of
from tpuctl.cli.run_params import with_run_options
from tpuctl.errors import TpuctlError

if TYPE_CHECKING:
    from tpuctl.services.run.jobfile import JobFile
    from tpuctl.services.run.request import RunRequest


@with_run_options  # its parameters: every option of tpuctl/services/run/options.py
def run(ctx: declare.Context, **given: Any) -> None:
    """Run a script on a TPU VM: stage, run, stream logs, tear down.

    The script runs on every worker of the node.

    Example: tpuctl run examples/train.py --accelerator v3-8 --outputs out/ -- --steps 200
    """
    from tpuctl.cli.run_file import merged
    from tpuctl.cli.run_ui import failed_json
    from tpuctl.services.run.request import RunRequest

    params, job_file, from_file = merged(ctx, given["file"])
    made: list[Any] = []  # the job's runner, once there is one
    try:
        request = RunRequest.of(params)  # each value read into its type (`--ttl 2h`: 7200)
        ending = _run(ctx, request, job_file, from_file, made)
    except TpuctlError as e:
        if params["json_out"] and not params["print_spec"]:
            failed_json(made[0] if made else None, e)
        raise
    if isinstance(ending, TpuctlError):
        raise ending
    if ending:
        raise declare.Exit(ending)


def _run(
    ctx: declare.Context,
    request: RunRequest,
    job_file: JobFile | None,
    from_file: set[str],
    made: list[Any],
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
    request.check(blame, from_file)
    root, rel = request.located(blame, from_file)
    spec = request.spec(root, rel, configured_service_account())
    redact.secret(spec.env.values())  # never in the --debug trace
    if request.print_spec:
        # the script as it was named (a symlinked folder stays as typed), else as found
        named = Path(str(request.script))
        shown: Path | str | None = named if named.is_file() else root / rel
        if request.in_image:  # the command as typed (none: the image's own)
            shown = request.script
        write_spec(ctx, request, from_file, shown, request.restarts_or_default)
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
    # before anything is created: a mistake found here costs no TPU time
    if not request.no_check and not request.image:
        doctor_gate.gate_run(root, rel, spec, request.force)
    app, json_out = app_of(ctx), request.json_out
    target = request.place(app.target(request.project, request.zone, many_zones=True))
    if request.image:  # resolved once: every worker pulls this digest
        check = not request.no_check
        doctor_gate.gate_image(app.factory, spec, target.project, check, request.force)
    # --bucket, else the config file's `bucket`, else the default: as `jobs` finds it.
    config = load_config_file()
    spec.bucket = staging.bucket_name(request.bucket, config, target.project)
    spec.bucket_named_by = staging.bucket_source(request.bucket, config, target.project)
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
