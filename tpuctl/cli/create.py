"""tpuctl create [NAME] --accelerator v3-8"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from tpuctl import catalog, interrupts
from tpuctl.catalog import DEFAULT_ACCELERATOR
from tpuctl.cli import render
from tpuctl.cli.options import Accelerator, AppEnv, Json, NoWait, Project, Zones, app_of
from tpuctl.errors import Interrupted, TpuctlError, UsageError

if TYPE_CHECKING:
    from tpuctl.config import Target
    from tpuctl.models import CreateSpec, Node
    from tpuctl.services.queued import QueueOptions

SSH_WAIT = 300.0  # seconds a fresh VM may take before SSH answers


def create(
    ctx: typer.Context,
    name: Annotated[
        str | None,
        typer.Argument(
            help="Node name: lowercase letters, digits, hyphens (default: made from your "
            "user name and the accelerator, e.g. ada-v3-8-4f1c).",
            show_default=False,
        ),
    ] = None,
    accelerator: Accelerator = DEFAULT_ACCELERATOR,
    version: Annotated[
        str | None,
        typer.Option("--version", help="Runtime version (default: the generation's base image)."),
    ] = None,
    zone: Zones = None,
    project: Project = None,
    spot: Annotated[
        bool, typer.Option("--spot", help="Spot capacity: cheaper, can be preempted.")
    ] = False,
    preemptible: Annotated[
        bool, typer.Option("--preemptible", help="Legacy preemptible capacity (24 h max).")
    ] = False,
    reserved: Annotated[
        bool, typer.Option("--reserved", help="Use the project's reservation.")
    ] = False,
    labels: Annotated[list[str], typer.Option("--labels", help="k=v[,k=v...]; repeatable.")] = [],  # noqa: B006
    metadata: Annotated[
        list[str], typer.Option("--metadata", help="k=v[,k=v...]; repeatable.")
    ] = [],  # noqa: B006
    description: Annotated[str, typer.Option("--description")] = "",
    network: Annotated[str | None, typer.Option("--network")] = None,
    subnetwork: Annotated[str | None, typer.Option("--subnetwork")] = None,
    service_account: Annotated[
        str | None,
        typer.Option(
            "--service-account",
            help="The VM's service account (default: the project's default compute account).",
        ),
    ] = None,
    scopes: Annotated[
        list[str],
        typer.Option("--scopes", help="The VM's OAuth scopes: a,b (default cloud-platform)."),
    ] = [],  # noqa: B006
    internal_ip_only: Annotated[
        bool, typer.Option("--internal-ip-only", help="No external IPs on the workers.")
    ] = False,
    tags: Annotated[
        list[str], typer.Option("--tags", help="Network tags for firewall rules: a,b; repeatable.")
    ] = [],  # noqa: B006
    ttl: Annotated[
        str | None,
        typer.Option("--ttl", help="Delete after this long (e.g. 8h); enforced by `tpuctl gc`."),
    ] = None,
    idle_timeout: Annotated[
        str | None, typer.Option("--idle-timeout", help="Delete after idling this long (e.g. 30m).")
    ] = None,
    idle_action: Annotated[
        str,
        typer.Option(
            "--idle-action", help="With --idle-timeout: delete, or stop (single-host only)."
        ),
    ] = "delete",
    no_wait: NoWait = False,
    wait_ssh: Annotated[
        bool, typer.Option("--wait-ssh", help="Also wait until SSH answers on every worker.")
    ] = False,
    json_out: Json = False,
    queued: Annotated[
        bool,
        typer.Option("--queued", help="Ask through a queued resource: wait for capacity."),
    ] = False,
    valid_until: Annotated[
        str | None,
        typer.Option("--valid-until", help="With --queued: give up after waiting this long (6h)."),
    ] = None,
    valid_until_time: Annotated[
        str | None,
        typer.Option("--valid-until-time", help="With --queued: give up at this time (ISO 8601)."),
    ] = None,
    keep_request: Annotated[
        bool,
        typer.Option(
            "--keep-request", help="With --queued: leave the request queued on Ctrl-C or timeout."
        ),
    ] = False,
    timeout: Annotated[
        str | None,
        typer.Option(
            "--timeout", help="With --queued: stop waiting after this long (default 24h)."
        ),
    ] = None,
    slices: Annotated[
        int,
        typer.Option(
            "--slices",
            help="Multislice: this many slices (nodes NAME-0, NAME-1, ...) through one "
            "queued resource NAME (implies --queued when more than 1).",
        ),
    ] = 1,
) -> None:
    """Create a TPU VM and wait until it is READY.

    Example: tpuctl create my-tpu --accelerator v3-8 --zone us-central1-a --spot

    With --queued the node is asked for through a queued resource, which waits for
    capacity; interrupting the wait deletes the request unless --keep-request.
    With --slices N (N > 1) the queued resource NAME asks for N slices, nodes NAME-0 to
    NAME-(N-1); `tpuctl delete NAME` deletes them all (docs/multislice.md).
    """
    from tpuctl.config import configured_service_account
    from tpuctl.durations import parse_duration
    from tpuctl.models import CreateSpec
    from tpuctl.services import cost, names, nodes

    if slices < 1:
        raise UsageError(f"--slices must be 1 or more, not {slices}")
    queued = queued or slices > 1  # a multislice request is a queued resource
    app = app_of(ctx)
    target = app.target(project, zone, many_zones=True)
    api = app.tpu()
    if name is None:
        name = names.generated_name(accelerator)
        render.info(f"node name: {name}")  # first, so a script reading stderr has it at once
    shape = catalog.shape(accelerator)
    spec = CreateSpec(
        name=name,
        shape=shape,
        version=version,
        spot=spot,
        preemptible=preemptible,
        reserved=reserved,
        labels=names.parse_pairs(labels, "label"),
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
    )
    queue_flags = valid_until or valid_until_time or keep_request or timeout
    if queue_flags and not queued:
        raise UsageError(
            "--valid-until, --valid-until-time, --keep-request and --timeout go with --queued"
        )
    from tpuctl.services import queued as queued_service

    options = queued_service.QueueOptions(
        valid_until=parse_duration(valid_until, "--valid-until") if valid_until else None,
        valid_until_time=valid_until_time,
        keep_request=keep_request,
        timeout=parse_duration(timeout, "--timeout") if timeout else queued_service.DEFAULT_TIMEOUT,
        slices=slices,
    )
    if slices > 1:  # every slice's name must be a node name too
        names.validate_name(queued_service.slice_ids(name, slices)[-1])
    # From here to the end, SIGTERM and SIGHUP interrupt as Ctrl-C does, and the create
    # call is not cut in half (tpuctl/interrupts.py).
    from tpuctl.services import zones

    quotas = app.factory.quotas()
    with interrupts.alike():
        order = list(target.candidates)
        if len(order) > 1:  # --zone a,b: each zone's price and quota first, then failover
            views = zones.survey(api, quotas, target, shape, spot or preemptible)
            render.info(f"zones for {accelerator}, tried in this order ({cost.note()}):")
            for view in sorted(views, key=lambda v: bool(v.dropped)):
                render.info(view.line())
            order = zones.usable(views, accelerator)
        request = _Request(app, spec, options, queued, no_wait, wait_ssh, json_out, len(order) == 1)
        zones.failover(
            order,
            lambda z: request.create_in(target.in_zone(z)),
            lambda z: zones.clear(api, target.in_zone(z), name, queued),
            render.info,
            f"{accelerator} node {name}",
        )


class _Request:
    """One create, in one zone (a failover tries it zone after zone)."""

    def __init__(
        self,
        app: AppEnv,
        spec: CreateSpec,
        options: QueueOptions,
        queued: bool,
        no_wait: bool,
        wait_ssh: bool,
        json_out: bool,
        announce: bool,
    ) -> None:
        self.app, self.spec, self.options = app, spec, options
        self.queued, self.no_wait, self.wait_ssh, self.json_out = (
            queued,
            no_wait,
            wait_ssh,
            json_out,
        )
        self.announce = announce

    def create_in(self, target: Target) -> None:
        from tpuctl.services import cost, nodes

        app, spec, options = self.app, self.spec, self.options
        queued, no_wait, wait_ssh, json_out = (
            self.queued,
            self.no_wait,
            self.wait_ssh,
            self.json_out,
        )
        name, accelerator = spec.name, spec.shape.name
        spot, preemptible, internal_ip_only = spec.spot, spec.preemptible, spec.internal_ip_only
        api = app.tpu()
        prepared = nodes.validate_create(api, target, spec, quotas=app.factory.quotas())
        rate = cost.hourly(spec.shape, spot or preemptible)
        slices = options.slices
        if rate is not None and self.announce:
            kind = "spot" if spot else "preemptible" if preemptible else "on-demand"
            price = cost.money(rate * slices, per_hour=True)
            what = f"{slices} x {accelerator}" if slices > 1 else accelerator
            render.info(f"{what} {kind}: about {price} ({cost.note()})")
        full_name = f"{target.parent}/nodes/{name}"
        made = False  # whether the node is known to exist (or asked for): then it is named
        try:
            if queued:
                made_nodes = _create_queued(
                    app, target, name, accelerator, prepared, options, no_wait, json_out
                )
                if made_nodes is None:
                    return
                made = True
                if wait_ssh:
                    for one in made_nodes:
                        _wait_ssh(app, one.full_name, len(one.workers), internal_ip_only)
                if slices > 1:
                    _show_slices(name, target, made_nodes, json_out)
                else:
                    _show(made_nodes[0], json_out)
                return
            made = True
            operation = nodes.create_node(api, target, spec, prepared)
            if no_wait:
                _started(
                    json_out,
                    {"name": name, "zone": target.zone, "operation": operation},
                    f"creating {name} ({accelerator}) in {target.zone}; "
                    f"watch it with `tpuctl describe {name} --zone {target.zone}`",
                )
                return
            with render.progress(f"creating {name} ({accelerator}) in {target.zone}:") as update:
                node = nodes.wait_for_state(
                    api,
                    full_name,
                    {"READY"},
                    operation=operation,
                    fail_states=nodes.FAILED_CREATE_STATES,
                    progress=update,
                )
            if wait_ssh:
                _wait_ssh(app, full_name, len(node.workers), internal_ip_only)
        except KeyboardInterrupt:
            if not made:
                raise
            # The node is the user's (they asked for it): say where it is, delete nothing.
            raise Interrupted(
                f"interrupted; node {name} exists in {target.zone} and may be billing",
                hint=f"delete it with `tpuctl delete {name} --zone {target.zone} --yes`",
            ) from None
        except TpuctlError as e:
            # A node that exists but never became ready may still bill: name it.
            if not e.hint:
                e.hint = (
                    f"if {name} still exists, delete it with "
                    f"`tpuctl delete {name} --zone {target.zone} --yes`"
                )
            raise
        _show(node, json_out)


def _started(json_out: bool, data: dict[str, Any], message: str) -> None:
    """--no-wait: the request is made; say what to do next (or the JSON of it)."""
    if json_out:
        render.print_json(data)
    else:
        render.info(message)


def _show(node: Node, json_out: bool) -> None:
    if json_out:
        render.print_json(node.to_json())
        return
    console = render.out()
    console.print(
        f"{node.name}  {node.zone}  {node.accelerator_type}  {node.state}", highlight=False
    )
    for w in node.workers:
        console.print(
            f"  worker {w.index}: {w.external_ip or '-'} (internal {w.internal_ip})",
            highlight=False,
        )


def _show_slices(name: str, target: Target, slices: list[Node], json_out: bool) -> None:
    """A multislice request: its slices, in order (each a node of its own)."""
    if json_out:
        render.print_json(
            {
                "kind": "queuedResource",
                "name": name,
                "zone": target.zone,
                "slices": [n.to_json() for n in slices],
            }
        )
        return
    render.info(
        f"queued resource {name}: {len(slices)} slices; `tpuctl delete {name} --zone "
        f"{target.zone}` deletes them all"
    )
    for node in slices:
        _show(node, json_out)


def _create_queued(
    app: AppEnv,
    target: Target,
    name: str,
    accelerator: str,
    prepared: CreateSpec,
    options: QueueOptions,
    no_wait: bool,
    json_out: bool,
) -> list[Node] | None:
    """Ask through the queue; wait (unless --no-wait) and return the READY node(s)."""
    from tpuctl.services import queued

    api = app.tpu()
    if no_wait:
        queued.enqueue(api, target, name, prepared, options)
        _started(
            json_out,
            {"name": name, "zone": target.zone, "queuedResource": True},
            f"queued {name} ({accelerator}) in {target.zone}; watch it with "
            f"`tpuctl list --zone {target.zone}`, cancel it with "
            f"`tpuctl delete {name} --zone {target.zone} --yes`",
        )
        return None
    what = f"{options.slices} x {accelerator}" if options.slices > 1 else accelerator
    with render.progress(f"queued {name} ({what}) in {target.zone}:") as update:
        return queued.provision_slices(
            api, target, name, options, node_spec=prepared, progress=update
        )


def _wait_ssh(app: AppEnv, full_name: str, workers: int, internal_ip: bool) -> None:
    """A node is ready for tpuctl once SSH answers on every worker."""
    from tpuctl.cli.ssh import report
    from tpuctl.services import remote
    from tpuctl.services import ssh as ssh_service

    name = full_name.rsplit("/", 1)[-1]
    ssh_api = app.factory.ssh()
    with render.progress(f"waiting for SSH on {workers} worker(s) of {name}:") as update:
        update("connecting", 0.0)
        plan = ssh_service.plan(app.tpu(), ssh_api, full_name, "all", internal_ip, wait=SSH_WAIT)
        results = remote.wait_ssh(ssh_api, plan, timeout=SSH_WAIT)
    if report(results):
        raise TpuctlError(
            f"{name} is READY but SSH does not answer on every worker",
            hint=f"try `tpuctl ssh {name} --worker all --command true` in a minute",
        )
