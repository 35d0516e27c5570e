"""`tpuctl emulator start|stop|status|preempt|maintenance`: the local Cloud TPU API emulator.

Parses the options and renders; starting, finding and stopping the emulator's process
(its record in STATE_DIR/emulator.json) is `tpuctl.emulator.control.daemon`'s.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from tpuctl.cli.help import Typer
from tpuctl.cli.options import app_of, seconds
from tpuctl.errors import ConfigError, TpuctlError, UsageError

# tpuctl.emulator is imported in the commands: other commands never load it.

app = Typer(
    help="Run a local emulator of the Cloud TPU API.", no_args_is_help=True, rich_markup_mode=None
)

StateDir = Annotated[
    Path | None,
    typer.Option(
        "--state-dir",
        help="Where the emulator keeps its state "
        "(default: $TPUCTL_STATE_DIR/emulator or ~/.local/state/tpuctl/emulator).",
    ),
]


def _state_dir(given: Path | None) -> Path:
    if given is not None:
        return given.expanduser().absolute()
    from tpuctl.config import state_dir

    return state_dir() / "emulator"


def _export_line(address: str) -> str:
    return f"export TPUCTL_EMULATOR_HOST={address}"


def _port(value: int | None) -> int | None:
    if value is not None and not 0 < value < 65536:
        raise typer.BadParameter(f"{value} is not a TCP port: use 1 to 65535")
    return value


@app.command()
def start(
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", callback=_port, help="Port to listen on.")] = 8470,
    state_dir: StateDir = None,
    detach: Annotated[
        bool, typer.Option("--detach", help="Run in the background and return once it answers.")
    ] = False,
    ssh_port: Annotated[
        int | None,
        typer.Option(
            "--ssh-port",
            callback=_port,
            help="Port of the workers' SSH servers (default: a free one).",
        ),
    ] = None,
    unconfined: Annotated[
        bool,
        typer.Option(
            "--unconfined",
            help="Where bubblewrap cannot run, run worker commands as plain local processes, "
            "and where Cloud Storage's server cannot have a network of its own, serve it on "
            "127.0.0.1 (default: refuse both; also TPUCTL_EMULATOR_UNCONFINED=1).",
        ),
    ] = False,
    fresh: Annotated[
        bool,
        typer.Option("--fresh", help="Start from nothing: forget the state kept from before."),
    ] = False,
) -> None:
    """Start the emulator and print the line that points tpuctl at it.

    In the foreground it serves until Ctrl-C. With --detach it runs on in the background
    (its log is STATE_DIR/emulator.log) until `tpuctl emulator stop`. Its state (nodes,
    queued requests, instances, buckets, quota and capacity settings) is kept in the state
    dir across a stop and a start; --fresh, or `tpuctl emulator reset`, forgets it.
    """
    from tpuctl.emulator.control import daemon

    directory = _state_dir(state_dir)
    with _reported():
        record = daemon.running(directory)
        if record is not None:
            daemon.wait_until_answering(record, directory / daemon.LOG)
            if fresh:
                _reset(record.address)
            typer.echo(_export_line(record.address))
            return
        if fresh:
            daemon.forget_state(directory)
        daemon.prepare_start(directory, host, port)
        warning = daemon.sandbox_warning(unconfined)
        if warning:
            typer.echo(warning, err=True)
        if detach:
            record = daemon.start_detached(directory, host, port, ssh_port, unconfined)
            typer.echo(_export_line(record.address))
            return

        def ready() -> None:
            typer.echo(_export_line(f"{host}:{port}"))
            typer.echo(f"serving with state in {directory}; Ctrl-C stops it", err=True)

        daemon.serve(directory, host, port, ssh_port, ready, unconfined)
        typer.echo("emulator stopped", err=True)


@contextmanager
def _reported() -> Iterator[None]:
    """What keeps the emulator from starting, reported as tpuctl's error of that kind."""
    from tpuctl.emulator.control.daemon import StartError

    try:
        yield
    except StartError as exc:
        kind = {"config": ConfigError, "usage": UsageError}.get(exc.kind, TpuctlError)
        raise kind(exc.message, hint=exc.hint) from None


def _reset(address: str) -> None:
    from tpuctl.emulator.control.client import EmulatorControl

    try:
        EmulatorControl(address).reset()
    except OSError as exc:
        raise TpuctlError(
            f"cannot reach the emulator at {address}: {exc}",
            hint="start it with `tpuctl emulator start --detach`",
        ) from None
    typer.echo(
        f"reset the emulator at {address}: no nodes, queued requests, instances or buckets; "
        "quotas, capacity and settings as at a first start",
        err=True,
    )


@app.command()
def reset(state_dir: StateDir = None) -> None:
    """Forget everything the emulator holds: a known state.

    Nodes, queued requests, instances, buckets, quota, capacity and fault settings go:
    the state is as at its first start.

    Example: tpuctl emulator reset
    """
    from tpuctl.emulator.control import daemon

    directory = _state_dir(state_dir)
    record = daemon.running(directory)
    in_use = os.environ.get("TPUCTL_EMULATOR_HOST", "").strip()
    address = in_use if in_use and state_dir is None else record.address if record else None
    if address is None:
        raise UsageError(
            f"no emulator to reset: none runs on the state dir {directory} and "
            "TPUCTL_EMULATOR_HOST is not set",
            hint="start one with `tpuctl emulator start --detach --fresh`",
        )
    _reset(address)


@app.command()
def stop(state_dir: StateDir = None) -> None:
    """Stop the emulator started on this state dir.

    Its nodes stay in the state dir.
    """
    from tpuctl.emulator.control import daemon

    directory = _state_dir(state_dir)
    record = daemon.stop(directory)
    if record is None:
        typer.echo(f"the emulator is not running (state dir {directory})")
    else:
        typer.echo(f"stopped the emulator at {record.address} (pid {record.pid})")


@app.command()
def status(
    state_dir: StateDir = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")] = False,
) -> None:
    """Say whether the emulator runs, where, and what it holds.

    Exit 1 if it does not run.
    """
    from tpuctl.emulator.control import daemon

    directory = _state_dir(state_dir)
    record = daemon.running(directory)
    address = record.address if record else None
    # The emulator this shell uses is the one to report on, wherever its state lives.
    in_use = os.environ.get("TPUCTL_EMULATOR_HOST", "").strip()
    if in_use and state_dir is None and in_use != address:
        address, record = in_use, None
    info = daemon.status(address) if address else None
    running = info is not None
    if as_json:
        report = {
            "running": running,
            "address": address if running else None,
            "pid": record.pid if record and running else None,
            "nodes": info["nodes"] if info else None,
            "storage_endpoint": info.get("storage_endpoint") if info else None,
            # the TPU API over gRPC, for google-cloud-tpu's default transport (host:port)
            "tpu_grpc_endpoint": info.get("tpu_grpc_endpoint") if info else None,
            # the Cloud Billing Catalog API (http://host:port, /v1/services/{id}/skus)
            "billing_endpoint": info.get("billing_endpoint") if info else None,
            # Artifact Registry's Docker API (host:port): image H/P/R/I is <this>/H/P/R/I
            "registry_endpoint": info.get("registry_endpoint") if info else None,
            "state_dir": str(directory),
        }
        typer.echo(json.dumps(report))
    elif running and info:
        who = f"pid {record.pid}" if record else "TPUCTL_EMULATOR_HOST"
        typer.echo(
            f"running at {address} ({who}): {info['nodes']} nodes, "
            f"Cloud Storage at {info.get('storage_endpoint') or 'none'}, "
            f"TPU API over gRPC at {info.get('tpu_grpc_endpoint') or 'none'}"
            + (f", state in {directory}" if record else "")
        )
        typer.echo(
            "its nodes, requests, instances, buckets and settings are kept across a restart; "
            "`tpuctl emulator reset` forgets them"
        )
    elif record:
        typer.echo(f"not answering: pid {record.pid} should serve {address}")
    elif address:
        typer.echo(f"not running: nothing answers at {address} (TPUCTL_EMULATOR_HOST)")
    else:
        typer.echo(f"not running (state dir {directory})")
    if not running:
        raise typer.Exit(1)


Zone = Annotated[str | None, typer.Option("--zone", "-z")]
Project = Annotated[str | None, typer.Option("--project", "-p")]


def _emulator(ctx: typer.Context, command: str) -> tuple[Any, str]:
    """The app's environment and the emulator's address (bad usage when none is set)."""
    app_env = app_of(ctx)
    address = app_env.factory.emulator_address
    if not address:
        raise UsageError(
            f"{command} works on the local emulator only, and TPUCTL_EMULATOR_HOST is not set",
            hint="`tpuctl emulator start --detach` prints the line to set it",
        )
    return app_env, str(address)


@app.command()
def preempt(
    ctx: typer.Context,
    name: Annotated[
        str,
        typer.Argument(
            help="A spot or preemptible node, on either API, or a Compute Engine slice's VM "
            "by its own name (as `gcloud compute instances list` shows it)."
        ),
    ],
    zone: Zone = None,
    project: Project = None,
    notice: Annotated[
        float | None,
        typer.Option(
            "--notice",
            parser=seconds("--notice", 0, 3600),
            help="Notice (instance/preempted TRUE, SIGTERM to the processes) before the "
            "node is PREEMPTED, e.g. 5s; 0: none. Default: the emulator's (30s; on "
            "Compute Engine at most 30s).",
        ),
    ] = None,
    worker: Annotated[
        int | None,
        typer.Option(
            "--worker",
            min=0,
            help="On a Compute Engine slice: the worker whose VM is preempted (Compute "
            "Engine preempts VMs one at a time). A Cloud TPU API node is preempted whole.",
        ),
    ] = None,
) -> None:
    """Preempt an emulated spot or preemptible node, as the cloud may.

    First the notice (about 30 s on Google Cloud), then PREEMPTED. A Compute Engine VM
    is then stopped or deleted, as its termination action says; on a slice, one VM
    (`--worker K`, or the VM's own name).

    Example: tpuctl emulator preempt my-spot-tpu --notice 5
    """
    from tpuctl.emulator.control.client import ControlError, EmulatorControl

    app_env, address = _emulator(ctx, "preempt")
    target = app_env.target(project, zone)
    control = EmulatorControl(address)
    try:
        node = None
        if worker is None:  # a Cloud TPU API node first; one VM of a slice is Compute's
            node = _preempt_node(control, f"{target.parent}/nodes/{name}", notice)
        if node is None:
            node = _preempt_vm(control, target.project, target.zone, name, worker, notice)
    except ControlError as exc:
        raise TpuctlError(f"cannot preempt {name}: {exc}") from None
    except OSError as exc:
        raise TpuctlError(f"cannot reach the emulator at {address}: {exc}") from None
    what = name if worker is None else f"worker {worker} of {name}"
    if node.get("slice"):  # a slice's VM, named as itself
        what = f"VM {name} (worker {node.get('worker')} of {node['slice']})"
    if node.get("state") in ("PREEMPTED", "TERMINATED", "GONE"):
        typer.echo(f"preempted {what} in {target.zone}", err=True)
    else:
        typer.echo(f"preempting {what} in {target.zone}: its notice has begun", err=True)


def _preempt_node(control: Any, path: str, notice: float | None) -> dict[str, Any] | None:
    """The Cloud TPU API node at `path`, preempted; None when there is none."""
    from tpuctl.emulator.control.client import ControlError

    try:
        return dict(control.preempt(path, notice))
    except ControlError as exc:
        if exc.status == 404:
            return None
        raise


def _preempt_vm(
    control: Any, project: str, zone: str, name: str, worker: int | None, notice: float | None
) -> dict[str, Any]:
    """A Compute Engine VM of the node `name` (its worker `worker` on a slice), or the
    slice's VM `name`; the answer in the TPU node's words (`state`), and for a VM named
    as itself its `slice` and `worker`."""
    from tpuctl.emulator.control.client import ControlError

    try:
        vm = control.preempt_worker(project, zone, name, worker, notice)
    except ControlError as exc:
        if exc.status == 404:
            raise ControlError(
                f"no node {name} in {zone}: neither a Cloud TPU API node nor a Compute "
                "Engine VM or slice (`tpuctl list` shows them)",
                404,
            ) from None
        raise
    return {**vm, "state": vm.get("status")}


WEEK = 7 * 86400.0


@app.command()
def maintenance(
    ctx: typer.Context,
    name: Annotated[
        str,
        typer.Argument(
            help="A node on either API, or a Compute Engine slice's VM by its own name "
            "(as `gcloud compute instances list` shows it)."
        ),
    ],
    zone: Zone = None,
    project: Project = None,
    notice: Annotated[
        float | None,
        typer.Option(
            "--notice",
            parser=seconds("--notice", 0, WEEK),
            help="How long before the window starts (upcomingMaintenance PENDING), e.g. "
            "10m; 0: now. Default: 60s.",
        ),
    ] = None,
    duration: Annotated[
        float | None,
        typer.Option(
            "--duration",
            parser=seconds("--duration", 0, WEEK),
            help="How long the window lasts (the VM is down for it). Default: 60s.",
        ),
    ] = None,
    worker: Annotated[
        int | None,
        typer.Option(
            "--worker",
            min=0,
            help="On a slice: the worker whose VM the maintenance is on (default: all). "
            "A Cloud TPU API node goes down whole.",
        ),
    ] = None,
) -> None:
    """Announce a host maintenance on a node, then carry it out.

    The node shows upcomingMaintenance (PENDING, its window) and its workers'
    metadata server instance/upcoming-maintenance; at the window's start
    instance/maintenance-event is TERMINATE_ON_HOST_MAINTENANCE and the processes get
    SIGTERM, then the VM is down (TPU API: REPAIRING; Compute Engine: TERMINATED) until
    the window's end, when it comes back unless it is spot or preemptible.

    Example: tpuctl emulator maintenance my-tpu --notice 5m --duration 2m
    """
    from tpuctl.emulator.control.client import ControlError, EmulatorControl

    app_env, address = _emulator(ctx, "maintenance")
    target = app_env.target(project, zone)
    control = EmulatorControl(address)
    notice = 60.0 if notice is None else notice
    paths = (
        f"{target.parent}/nodes/{name}",
        f"projects/{target.project}/zones/{target.zone}/instances/{name}",
    )
    try:
        try:
            shown = control.maintenance(paths[0], notice, duration, worker)
        except ControlError as exc:
            if exc.status != 404:
                raise
            shown = control.maintenance(paths[1], notice, duration, worker)
    except ControlError as exc:
        if exc.status == 404:
            exc = ControlError(
                f"no node {name} in {target.zone}: neither a Cloud TPU API node nor a "
                "Compute Engine VM or slice (`tpuctl list` shows them)",
                404,
            )
        raise TpuctlError(f"cannot announce a maintenance on {name}: {exc}") from None
    except OSError as exc:
        raise TpuctlError(f"cannot reach the emulator at {address}: {exc}") from None
    window = shown["upcomingMaintenance"]
    what = name if worker is None else f"worker {worker} of {name}"
    typer.echo(
        f"maintenance of {what} in {target.zone}: {window['maintenanceStatus']}, window "
        f"{window['windowStartTime']} to {window['windowEndTime']}",
        err=True,
    )
