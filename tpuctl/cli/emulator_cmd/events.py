"""`tpuctl emulator preempt|maintenance`: the cloud's events played on an emulated node
(a preemption, a host maintenance), through the emulator's control plane at
TPUCTL_EMULATOR_HOST. Registered on `tpuctl emulator` by the package's `__init__`."""

from __future__ import annotations

from typing import Annotated, Any

from tpuctl.cli import declare
from tpuctl.cli.options import app_of, seconds
from tpuctl.errors import TpuctlError, UsageError

Zone = Annotated[str | None, declare.Option("--zone", "-z")]


Project = Annotated[str | None, declare.Option("--project", "-p")]


def _emulator(ctx: declare.Context, command: str) -> tuple[Any, str]:
    """The app's environment and the emulator's address (bad usage when none is set)."""
    app_env = app_of(ctx)
    address = app_env.factory.emulator_address
    if not address:
        raise UsageError(
            f"{command} works on the local emulator only, and TPUCTL_EMULATOR_HOST is not set",
            hint="`tpuctl emulator start --detach` prints the line to set it",
        )
    return app_env, str(address)


def preempt(
    ctx: declare.Context,
    name: Annotated[
        str,
        declare.Argument(
            help="A spot or preemptible node, on either API, or a Compute Engine slice's VM "
            "by its own name (as `gcloud compute instances list` shows it)."
        ),
    ],
    zone: Zone = None,
    project: Project = None,
    notice: Annotated[
        float | None,
        declare.Option(
            "--notice",
            parser=seconds("--notice", 0, 3600),
            help="Notice (instance/preempted TRUE, SIGTERM to the processes) before the "
            "node is PREEMPTED, e.g. 5s; 0: none. Default: the emulator's (30s; on "
            "Compute Engine at most 30s).",
        ),
    ] = None,
    worker: Annotated[
        int | None,
        declare.Option(
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
        declare.echo(f"preempted {what} in {target.zone}", err=True)
    else:
        declare.echo(f"preempting {what} in {target.zone}: its notice has begun", err=True)


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


def maintenance(
    ctx: declare.Context,
    name: Annotated[
        str,
        declare.Argument(
            help="A node on either API, or a Compute Engine slice's VM by its own name "
            "(as `gcloud compute instances list` shows it)."
        ),
    ],
    zone: Zone = None,
    project: Project = None,
    notice: Annotated[
        float | None,
        declare.Option(
            "--notice",
            parser=seconds("--notice", 0, WEEK),
            help="How long before the window starts (upcomingMaintenance PENDING), e.g. "
            "10m; 0: now. Default: 60s.",
        ),
    ] = None,
    duration: Annotated[
        float | None,
        declare.Option(
            "--duration",
            parser=seconds("--duration", 0, WEEK),
            help="How long the window lasts (the VM is down for it). Default: 60s.",
        ),
    ] = None,
    worker: Annotated[
        int | None,
        declare.Option(
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
    declare.echo(
        f"maintenance of {what} in {target.zone}: {window['maintenanceStatus']}, window "
        f"{window['windowStartTime']} to {window['windowEndTime']}",
        err=True,
    )
