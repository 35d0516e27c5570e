"""tpuctl create [NAME] --accelerator v3-8"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from tpuctl import catalog
from tpuctl.catalog import DEFAULT_ACCELERATOR
from tpuctl.cli import declare, render, views
from tpuctl.cli import node_options as opt
from tpuctl.cli.options import Accelerator, Api, Json, NoWait, Project, Zones, app_of

if TYPE_CHECKING:
    from tpuctl.services.create import CreateOutcome, CreateRequest


def create(
    ctx: declare.Context,
    name: Annotated[
        str | None,
        declare.Argument(
            help="Node name: lowercase letters, digits, hyphens (default: made from your "
            "user name and the accelerator, e.g. ada-v3-8-4f1c).",
            show_default=False,
        ),
    ] = None,
    accelerator: Accelerator = DEFAULT_ACCELERATOR,
    version: opt.Version = None,
    zone: Zones = None,
    project: Project = None,
    spot: opt.Spot = False,
    preemptible: opt.Preemptible = False,
    reserved: opt.Reserved = False,
    reservation: opt.Reservation = None,
    labels: opt.Labels = [],  # noqa: B006
    metadata: Annotated[
        list[str], declare.Option("--metadata", help="k=v[,k=v...]; repeatable.")
    ] = [],  # noqa: B006
    description: Annotated[str, declare.Option("--description")] = "",
    network: opt.Network = None,
    subnetwork: opt.Subnetwork = None,
    service_account: opt.ServiceAccount = None,
    scopes: opt.Scopes = [],  # noqa: B006
    internal_ip_only: opt.InternalIpOnly = False,
    tags: opt.Tags = [],  # noqa: B006
    ttl: opt.Ttl = None,
    max_cost: opt.MaxCost = None,
    idle_timeout: Annotated[
        str | None,
        declare.Option("--idle-timeout", help="Delete after idling this long (e.g. 30m)."),
    ] = None,
    idle_action: Annotated[
        str,
        declare.Option(
            "--idle-action", help="With --idle-timeout: delete, or stop (single-host only)."
        ),
    ] = "delete",
    no_wait: NoWait = False,
    wait_ssh: Annotated[
        bool, declare.Option("--wait-ssh", help="Also wait until SSH answers on every worker.")
    ] = False,
    json_out: Json = False,
    queued: opt.Queued = False,
    valid_until: opt.ValidUntil = None,
    valid_until_time: Annotated[
        str | None,
        declare.Option(
            "--valid-until-time", help="With --queued: give up at this time (ISO 8601)."
        ),
    ] = None,
    keep_request: Annotated[
        bool,
        declare.Option(
            "--keep-request",
            help="With --queued or --flex-start: leave the request waiting on Ctrl-C or timeout.",
        ),
    ] = False,
    timeout: Annotated[
        str | None,
        declare.Option(
            "--timeout",
            help="With --queued or --flex-start: stop waiting after this long (default 24h).",
        ),
    ] = None,
    flex_start: opt.FlexStart = False,
    max_run_duration: opt.MaxRunDuration = None,
    api: Api = None,
    slices: opt.Slices = 1,
) -> None:
    """Create a TPU VM and wait until it is READY.

    Example: tpuctl create my-tpu --accelerator v3-8 --zone us-central1-a --spot

    With --queued the node is asked for through a queued resource, which waits for
    capacity; interrupting the wait deletes the request unless --keep-request.
    With --slices N (N > 1) the queued resource NAME asks for N slices, nodes NAME-0 to
    NAME-(N-1); `tpuctl delete NAME` deletes them all (docs/multislice.md).
    """
    from tpuctl.config import configured_service_account, load_config_file
    from tpuctl.durations import parse_duration
    from tpuctl.models import CreateSpec
    from tpuctl.services import create as create_service
    from tpuctl.services import names, nodes
    from tpuctl.services import queued as queued_service
    from tpuctl.services.cost import parse_dollars

    app = app_of(ctx)
    target = app.target(project, zone, many_zones=True)
    if name is None:
        name = names.generated_name(accelerator)
        render.info(f"node name: {name}")  # first, so a script reading stderr has it at once
    spec = CreateSpec(
        name=name,
        shape=catalog.shape(accelerator),
        version=version,
        spot=spot,
        preemptible=preemptible,
        reserved=reserved,
        reservation=reservation,
        labels=names.parse_labels(labels),
        metadata=names.parse_pairs(metadata, "metadata entry"),
        network=network,
        subnetwork=subnetwork,
        service_account=service_account or configured_service_account(),
        scopes=nodes.parse_scopes(scopes),
        internal_ip_only=internal_ip_only,
        tags=names.parse_tags(tags),
        description=description,
        ttl=parse_duration(ttl, "--ttl") if ttl else None,
        idle_timeout=parse_duration(idle_timeout, "--idle-timeout") if idle_timeout else None,
        idle_action=idle_action,
        max_cost=parse_dollars(max_cost) if max_cost else None,
        owner=names.owner_label(
            app.factory.required_account("the node's owner label (tpuctl-owner)")
        ),
    )
    request = create_service.CreateRequest(
        spec,
        queued=queued,
        queue=queued_service.QueueOptions(
            valid_until=parse_duration(valid_until, "--valid-until") if valid_until else None,
            valid_until_time=valid_until_time,
            keep_request=keep_request,
            timeout=parse_duration(timeout, "--timeout")
            if timeout
            else queued_service.DEFAULT_TIMEOUT,
            slices=slices,
            flex_start=flex_start,
            max_run_duration=parse_duration(max_run_duration, "--max-run-duration")
            if max_run_duration
            else None,
        ),
        wait=not no_wait,
        wait_ssh=wait_ssh,
        queue_flags=bool(valid_until or valid_until_time or keep_request or timeout),
    )
    from tpuctl.cli.ssh import report

    chosen = create_service.choose_api(spec.shape, api, load_config_file())
    quotas = app.factory.quotas()  # each API checks its own pool (TpuBackend.check_quota)
    backend = app.factory.backend(chosen)
    adapters = create_service.Adapters(backend, quotas, app.factory.ssh, report)
    made = create_service.create(adapters, target, request, render.StderrUi())
    _show_outcome(made, request, json_out)


def _show_outcome(made: CreateOutcome, request: CreateRequest, json_out: bool) -> None:
    name, zone, acc = request.spec.name, made.target.zone, request.spec.shape.name
    if made.started and request.queued:
        views.started(
            json_out,
            {"name": name, "zone": zone, "queuedResource": True},
            f"queued {name} ({acc}) in {zone}; watch it with `tpuctl list --zone {zone}`, "
            f"cancel it with `tpuctl delete {name} --zone {zone} --yes`",
        )
    elif made.started:
        views.started(
            json_out,
            {"name": name, "zone": zone, "operation": made.operation},
            f"creating {name} ({acc}) in {zone}; "
            f"watch it with `tpuctl describe {name} --zone {zone}`",
        )
    elif request.queue.slices > 1:
        views.show_slices(name, made.target, made.nodes, json_out)
    else:
        views.show_node(made.nodes[0], json_out)
