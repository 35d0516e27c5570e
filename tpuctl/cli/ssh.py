"""tpuctl ssh NAME [--worker N] [-- OPENSSH ARGS] / --command CMD on many workers

The interactive form replaces tpuctl with the system OpenSSH client (terminals, agent
forwarding and escape sequences behave as usual); `--command` runs on the chosen
workers at once with tpuctl's own client. The options and output shared with
`tpuctl exec` and `tpuctl scp` live here too.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated

from tpuctl.cli import declare, render
from tpuctl.cli.options import AppEnv, NodeName, Project, Zone, app_of, seconds
from tpuctl.errors import ConfigError, TpuctlError

if TYPE_CHECKING:
    from tpuctl.cloud.ssh import SshApi
    from tpuctl.services.remote import WorkerResult
    from tpuctl.services.ssh import Plan

Workers = Annotated[
    str, declare.Option("--worker", "-w", help="all, N, a list (0,2) or a range (1-3).")
]
InternalIp = Annotated[
    bool, declare.Option("--internal-ip", help="Connect to internal IPs (from inside the VPC).")
]
MaxParallel = Annotated[
    int, declare.Option("--max-parallel", help="At most this many workers at once (0: all).")
]
OutputDir = Annotated[
    Path | None,
    declare.Option("--output-dir", help="Write each worker's output to DIR/w<K>.log instead."),
]
ConnectTimeout = Annotated[
    float,
    declare.Option(
        "--connect-timeout",
        parser=seconds("--connect-timeout"),
        show_default=False,
        help="How long to keep retrying a worker that is booting (default 60s).",
    ),
]
_COLOURS = (36, 33, 32, 35, 34, 31)


class WorkerPrinter:
    """Remote output, each line prefixed with its worker (`[w3] `), coloured on a terminal;
    or raw when there is one worker; or one file per worker under `output_dir`."""

    def __init__(self, prefix: bool, output_dir: Path | None = None) -> None:
        self._prefix = prefix
        self._dir = output_dir
        self._partial: dict[tuple[int, str], bytes] = {}
        self._files: dict[int, IO[bytes]] = {}
        self._colour = {
            name: stream.isatty() and not os.environ.get("NO_COLOR")
            for name, stream in (("stdout", sys.stdout), ("stderr", sys.stderr))
        }
        if output_dir is not None:
            output_dir.mkdir(parents=True, exist_ok=True)

    def _stream(self, name: str) -> IO[bytes]:
        stream = sys.stdout if name == "stdout" else sys.stderr
        stream.flush()
        return stream.buffer

    def _tag(self, worker: int, stream: str) -> bytes:
        tag = f"[w{worker}]"
        if self._colour[stream]:
            tag = f"\x1b[{_COLOURS[worker % len(_COLOURS)]}m{tag}\x1b[0m"
        return (tag + " ").encode()

    def __call__(self, worker: int, stream: str, data: bytes) -> None:
        if self._dir is not None:
            if worker not in self._files:
                self._files[worker] = open(self._dir / f"w{worker}.log", "wb")  # noqa: SIM115
            self._files[worker].write(data)
            return
        out = self._stream(stream)
        if not self._prefix:
            out.write(data)
            out.flush()
            return
        *lines, rest = (self._partial.pop((worker, stream), b"") + data).split(b"\n")
        if rest:
            self._partial[(worker, stream)] = rest
        if lines:
            tag = self._tag(worker, stream)
            out.write(b"".join(tag + line + b"\n" for line in lines))
            out.flush()

    def close(self) -> None:
        for (worker, stream), rest in sorted(self._partial.items()):
            out = self._stream(stream)
            out.write(self._tag(worker, stream) + rest + b"\n")
            out.flush()
        self._partial.clear()
        for f in self._files.values():
            f.close()


def make_plan(
    app: AppEnv,
    name: str,
    zone: str | None,
    project: str | None,
    workers: str,
    internal_ip: bool,
    connect_timeout: float,
    interactive: bool = False,
) -> tuple[SshApi, Plan]:
    from tpuctl.services import names
    from tpuctl.services import ssh as ssh_service
    from tpuctl.services.locate import locate

    names.validate_name(name)
    target = app.target(project, zone)
    api, node = locate(app.backends(), target, name, render.info)  # another zone's, said so
    ssh_api = app.factory.ssh()
    plan = ssh_service.plan(
        api,
        ssh_api,
        node.full_name,
        workers,
        internal_ip,
        connect_timeout,
        interactive=interactive,
        node=node,
    )
    return ssh_api, plan


def report(results: list[WorkerResult]) -> int:
    """Say which workers failed and why (stderr); return the combined exit status."""
    from tpuctl.services import remote

    summary = remote.failure_summary(results)
    if summary:  # plain text: file names and messages must not be read as markup
        sys.stderr.write(summary + "\n")
    if any(r.host_key_refused for r in results):
        sys.stderr.write(f"hint: {remote.HOST_KEY_HINT}\n")
    sys.stderr.flush()
    return remote.exit_status(results)


def run_everywhere(
    ssh_api: SshApi,
    plan: Plan,
    command: str,
    max_parallel: int,
    output_dir: Path | None,
    connect_timeout: float,
) -> int:
    from tpuctl.services import remote

    printer = WorkerPrinter(prefix=len(plan.endpoints) > 1, output_dir=output_dir)
    try:
        results = remote.run_command(ssh_api, plan, command, printer, max_parallel, connect_timeout)
    finally:
        printer.close()
    if output_dir is not None:
        render.info(f"output of {len(results)} workers in {output_dir}/w<K>.log")
    return report(results)


def ssh(
    ctx: declare.Context,
    name: NodeName,
    openssh_args: Annotated[
        list[str] | None,
        declare.Argument(help="After `--`: OpenSSH options (and a command) for the shell."),
    ] = None,
    worker: Workers = "0",
    command: Annotated[
        str | None,
        declare.Option("--command", help="Run this shell command line on the chosen workers."),
    ] = None,
    internal_ip: InternalIp = False,
    max_parallel: MaxParallel = 0,
    output_dir: OutputDir = None,
    connect_timeout: ConnectTimeout = 60.0,
    dry_run: Annotated[
        bool, declare.Option("--dry-run", help="Print the OpenSSH command line instead.")
    ] = False,
    zone: Zone = None,
    project: Project = None,
) -> None:
    """Open a shell on a worker, or run a command on several.

    Host keys are checked strictly.

    Example: tpuctl ssh my-tpu --worker all --command "python3 train.py"
    """
    ssh_api, plan = make_plan(
        app_of(ctx), name, zone, project, worker, internal_ip, connect_timeout, command is None
    )
    if command is not None:
        code = run_everywhere(ssh_api, plan, command, max_parallel, output_dir, connect_timeout)
        raise declare.Exit(code)
    if len(plan.endpoints) != 1:
        raise TpuctlError(
            f"an interactive shell needs one worker, not {len(plan.endpoints)}",
            hint="pick one with --worker N, or run a command on them all with --command",
        )
    from tpuctl.services import remote
    from tpuctl.services import ssh as ssh_service

    argv = ssh_service.openssh_command(plan, list(openssh_args or []))
    if dry_run:
        sys.stdout.write(ssh_service.printable(argv) + "\n")
        return
    executable = shutil.which("ssh")
    if executable is None:
        raise ConfigError(
            "OpenSSH's client `ssh` is not installed",
            hint="install it (e.g. `apt-get install openssh-client`), or use --command",
        )

    async def probe(session: object, ep: object) -> int:
        return 0

    # Check the host key (and wait for a booting VM) first, to explain a refusal.
    [result] = remote.on_workers(ssh_api, plan, probe, connect_timeout=connect_timeout)
    if result.error:
        raise TpuctlError(
            result.error, hint=remote.HOST_KEY_HINT if result.host_key_refused else None
        )
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(executable, argv)
