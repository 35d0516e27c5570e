"""`tpuctl emulator start|stop|status`: the local Cloud TPU API emulator.

A running emulator is recorded in STATE_DIR/emulator.json ({pid, host, port}); its
nodes live in STATE_DIR/state.json, so they outlive a restart.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from tpuctl.errors import TpuctlError, UsageError

app = typer.Typer(help="Run a local emulator of the Cloud TPU API.", no_args_is_help=True)

RECORD = "emulator.json"
LOG = "emulator.log"
START_TIMEOUT = 15.0
STOP_TIMEOUT = 10.0

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


def _export_line(host: str, port: int) -> str:
    return f"export TPUCTL_EMULATOR_HOST={host}:{port}"


def _read_record(directory: Path) -> dict[str, Any] | None:
    try:
        record = json.loads((directory / RECORD).read_text())
        return {"pid": int(record["pid"]), "host": str(record["host"]), "port": int(record["port"])}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_record(directory: Path, pid: int, host: str, port: int) -> None:
    tmp = directory / f".{RECORD}.tmp"
    tmp.write_text(json.dumps({"pid": pid, "host": host, "port": port}) + "\n")
    os.replace(tmp, directory / RECORD)


def _remove_record(directory: Path, pid: int) -> None:
    record = _read_record(directory)
    if record is not None and record["pid"] == pid:
        (directory / RECORD).unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie (an unreaped one counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _is_tpuctl(pid: int) -> bool:
    """Guards against a recycled pid: the process must be tpuctl's (where /proc tells)."""
    try:
        return b"tpuctl" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return not Path("/proc/self").exists()


def _running(directory: Path) -> dict[str, Any] | None:
    record = _read_record(directory)
    if record is not None and _alive(record["pid"]) and _is_tpuctl(record["pid"]):
        return record
    return None


def _status(host: str, port: int) -> dict[str, Any] | None:
    """The emulator's status, or None if nothing answers there."""
    from tpuctl.emulator.control import ControlError, EmulatorControl

    try:
        return EmulatorControl(f"{host}:{port}", timeout=2).status()
    except (OSError, ValueError, ControlError):
        return None


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def _wait_until_answering(host: str, port: int, pid: int, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if _status(host, port) is not None:
            return
        if not _alive(pid):
            raise TpuctlError(
                f"the emulator (pid {pid}) exited before it answered on {host}:{port}",
                hint=f"see its log: {log}",
            )
        time.sleep(0.05)
    raise TpuctlError(
        f"the emulator (pid {pid}) did not answer on {host}:{port} within {START_TIMEOUT:.0f} s",
        hint=f"see its log: {log}; stop it with `tpuctl emulator stop`",
    )


def _start_detached(host: str, port: int, directory: Path, ssh_port: int | None) -> None:
    log = directory / LOG
    package_root = str(Path(__file__).resolve().parents[2])
    child_env = dict(os.environ)
    child_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (package_root, child_env.get("PYTHONPATH", "")) if p
    )
    command = [sys.executable, "-m", "tpuctl.emulator", "--host", host, "--port", str(port)]
    if ssh_port:
        command += ["--ssh-port", str(ssh_port)]
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [*command, "--state-dir", str(directory)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
            env=child_env,
        )
    _write_record(directory, proc.pid, host, port)
    try:
        _wait_until_answering(host, port, proc.pid, log)
    except TpuctlError:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        _remove_record(directory, proc.pid)
        raise
    proc.returncode = 0  # it runs on in its own session: keep Popen from reporting it


def _raise_interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def _run_foreground(host: str, port: int, directory: Path, ssh_port: int | None) -> None:
    from tpuctl.emulator.server import EmulatorServer
    from tpuctl.emulator.storage import StorageError

    server = EmulatorServer(host, port, directory, ssh_port=ssh_port)
    try:
        server.start()
    except OSError:
        raise UsageError(
            f"port {port} on {host} is in use", hint="pick another with --port"
        ) from None
    except StorageError as exc:
        raise TpuctlError(f"cannot start the emulator's Cloud Storage: {exc}") from None
    _write_record(directory, os.getpid(), host, port)
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    typer.echo(_export_line(host, port))
    typer.echo(f"serving with state in {directory}; Ctrl-C stops it", err=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        typer.echo("emulator stopped", err=True)
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.stop()
        _remove_record(directory, os.getpid())


@app.command()
def start(
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8470,
    state_dir: StateDir = None,
    detach: Annotated[
        bool, typer.Option("--detach", help="Run in the background and return once it answers.")
    ] = False,
    ssh_port: Annotated[
        int | None,
        typer.Option("--ssh-port", help="Port of the workers' SSH servers (default: a free one)."),
    ] = None,
) -> None:
    """Start the emulator and print the line that points tpuctl at it.

    In the foreground it serves until Ctrl-C. With --detach it runs on in the background
    (its log is STATE_DIR/emulator.log) until `tpuctl emulator stop`.
    """
    directory = _state_dir(state_dir)
    record = _running(directory)
    if record is not None:
        log = directory / LOG
        _wait_until_answering(record["host"], record["port"], record["pid"], log)
        typer.echo(_export_line(record["host"], record["port"]))
        return
    if not _port_free(host, port):
        raise UsageError(f"port {port} on {host} is in use", hint="pick another with --port")
    directory.mkdir(parents=True, exist_ok=True)
    if detach:
        _start_detached(host, port, directory, ssh_port)
        typer.echo(_export_line(host, port))
    else:
        _run_foreground(host, port, directory, ssh_port)


@app.command()
def stop(state_dir: StateDir = None) -> None:
    """Stop the emulator started on this state dir (its nodes stay in the state dir)."""
    directory = _state_dir(state_dir)
    record = _running(directory)
    if record is None:
        (directory / RECORD).unlink(missing_ok=True)
        typer.echo(f"the emulator is not running (state dir {directory})")
        return
    pid = record["pid"]
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)
        while _alive(pid):
            time.sleep(0.05)
    (directory / RECORD).unlink(missing_ok=True)
    typer.echo(f"stopped the emulator at {record['host']}:{record['port']} (pid {pid})")


@app.command()
def status(
    state_dir: StateDir = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")] = False,
) -> None:
    """Say whether the emulator runs, where, and how many nodes it holds (exit 1 if not)."""
    directory = _state_dir(state_dir)
    record = _running(directory)
    info = _status(record["host"], record["port"]) if record else None
    address = f"{record['host']}:{record['port']}" if record else None
    running = info is not None
    if as_json:
        report = {
            "running": running,
            "address": address if running else None,
            "pid": record["pid"] if record and running else None,
            "nodes": info["nodes"] if info else None,
            "storage_endpoint": info.get("storage_endpoint") if info else None,
            "state_dir": str(directory),
        }
        typer.echo(json.dumps(report))
    elif running and record and info:
        typer.echo(
            f"running at {address} (pid {record['pid']}): {info['nodes']} nodes, "
            f"Cloud Storage at {info.get('storage_endpoint') or 'none'}, state in {directory}"
        )
    elif record:
        typer.echo(f"not answering: pid {record['pid']} should serve {address}")
    else:
        typer.echo(f"not running (state dir {directory})")
    if not running:
        raise typer.Exit(1)


@app.command()
def preempt(
    name: Annotated[str, typer.Argument(help="A spot or preemptible node.")],
    zone: Annotated[str | None, typer.Option("--zone", "-z")] = None,
    project: Annotated[str | None, typer.Option("--project", "-p")] = None,
) -> None:
    """Preempt an emulated spot/preemptible node now, as the cloud may at any time.

    Example: tpuctl emulator preempt my-spot-tpu
    """
    from tpuctl.cli.options import env
    from tpuctl.emulator.control import ControlError, EmulatorControl

    app_env = env()
    address = app_env.factory.emulator_address
    if not address:
        raise UsageError(
            "preempt works on the local emulator only, and TPUCTL_EMULATOR_HOST is not set",
            hint="`tpuctl emulator start --detach` prints the line to set it",
        )
    target = app_env.target(project, zone)
    try:
        EmulatorControl(address).preempt(f"{target.parent}/nodes/{name}")
    except ControlError as exc:
        raise TpuctlError(f"cannot preempt {name}: {exc}") from None
    except OSError as exc:
        raise TpuctlError(f"cannot reach the emulator at {address}: {exc}") from None
    typer.echo(f"preempted {name} in {target.zone}", err=True)
