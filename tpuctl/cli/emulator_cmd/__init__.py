"""`tpuctl emulator start|stop|status|preempt|maintenance`: the local Cloud TPU API emulator.

Parses the options and renders; starting, finding and stopping the emulator's process
(its record in STATE_DIR/emulator.json) is `tpuctl.emulator.control.daemon`'s. The
cloud's events played on a node (preempt, maintenance) are `events.py`'s.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

from tpuctl.cli import declare
from tpuctl.cli.declare import App
from tpuctl.cli.emulator_cmd import events
from tpuctl.errors import ConfigError, TpuctlError, UsageError

# tpuctl.emulator is imported in the commands: other commands never load it.

app = App(help="Run a local emulator of the Cloud TPU API.", no_args_is_help=True)

StateDir = Annotated[
    Path | None,
    declare.Option(
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
        raise declare.BadParameter(f"{value} is not a TCP port: use 1 to 65535")
    return value


@app.command()
def start(
    host: Annotated[str, declare.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[
        int, declare.Option("--port", callback=_port, help="Port to listen on.")
    ] = 8470,
    state_dir: StateDir = None,
    detach: Annotated[
        bool, declare.Option("--detach", help="Run in the background and return once it answers.")
    ] = False,
    ssh_port: Annotated[
        int | None,
        declare.Option(
            "--ssh-port",
            callback=_port,
            help="Port of the workers' SSH servers (default: a free one).",
        ),
    ] = None,
    unconfined: Annotated[
        bool,
        declare.Option(
            "--unconfined",
            help="Where bubblewrap cannot run, run worker commands as plain local processes, "
            "and where Cloud Storage's server cannot have a network of its own, serve it on "
            "127.0.0.1 (default: refuse both; also TPUCTL_EMULATOR_UNCONFINED=1).",
        ),
    ] = False,
    fresh: Annotated[
        bool,
        declare.Option("--fresh", help="Start from nothing: forget the state kept from before."),
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
            declare.echo(_export_line(record.address))
            return
        if fresh:
            daemon.forget_state(directory)
        daemon.prepare_start(directory, host, port)
        warning = daemon.sandbox_warning(unconfined)
        if warning:
            declare.echo(warning, err=True)
        if detach:
            record = daemon.start_detached(directory, host, port, ssh_port, unconfined)
            declare.echo(_export_line(record.address))
            return

        def ready() -> None:
            declare.echo(_export_line(f"{host}:{port}"))
            declare.echo(f"serving with state in {directory}; Ctrl-C stops it", err=True)

        daemon.serve(directory, host, port, ssh_port, ready, unconfined)
        declare.echo("emulator stopped", err=True)


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
    declare.echo(
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
        declare.echo(f"the emulator is not running (state dir {directory})")
    else:
        declare.echo(f"stopped the emulator at {record.address} (pid {record.pid})")


@app.command()
def status(
    state_dir: StateDir = None,
    as_json: Annotated[bool, declare.Option("--json", help="Print JSON on stdout.")] = False,
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
        declare.echo(json.dumps(report))
    elif running and info:
        who = f"pid {record.pid}" if record else "TPUCTL_EMULATOR_HOST"
        declare.echo(
            f"running at {address} ({who}): {info['nodes']} nodes, "
            f"Cloud Storage at {info.get('storage_endpoint') or 'none'}, "
            f"TPU API over gRPC at {info.get('tpu_grpc_endpoint') or 'none'}"
            + (f", state in {directory}" if record else "")
        )
        declare.echo(
            "its nodes, requests, instances, buckets and settings are kept across a restart; "
            "`tpuctl emulator reset` forgets them"
        )
    elif record:
        declare.echo(f"not answering: pid {record.pid} should serve {address}")
    elif address:
        declare.echo(f"not running: nothing answers at {address} (TPUCTL_EMULATOR_HOST)")
    else:
        declare.echo(f"not running (state dir {directory})")
    if not running:
        raise declare.Exit(1)


# the cloud's events on a node, after the emulator's own commands in `--help`
app.command()(events.preempt)
app.command()(events.maintenance)
