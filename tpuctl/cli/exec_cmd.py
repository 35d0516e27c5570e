"""tpuctl exec NAME -- CMD ARGS...: one command on every worker, arguments kept exact."""

from __future__ import annotations

import shlex
from typing import Annotated

from tpuctl.cli import declare
from tpuctl.cli.options import NodeName, Project, Zone, app_of
from tpuctl.cli.ssh import (
    ConnectTimeout,
    InternalIp,
    MaxParallel,
    OutputDir,
    Workers,
    make_plan,
    run_everywhere,
)


def exec_command(
    ctx: declare.Context,
    name: NodeName,
    command: Annotated[
        list[str], declare.Argument(help="After `--`: the program and its arguments.")
    ],
    worker: Workers = "all",
    internal_ip: InternalIp = False,
    max_parallel: MaxParallel = 0,
    output_dir: OutputDir = None,
    connect_timeout: ConnectTimeout = 60.0,
    zone: Zone = None,
    project: Project = None,
) -> None:
    """Run a program on a node's workers, output prefixed by worker.

    All workers by default.

    Each argument reaches the VM exactly as given (quoted for the remote shell), so
    spaces, quotes, $() and ; are never interpreted there; for shell syntax such as
    pipes use `tpuctl ssh NAME --worker all --command "..."`. Exit status: the first
    non-zero status in worker order.

    Example: tpuctl exec my-tpu -- python3 -c "import os; print(os.getcwd())"
    """
    ssh_api, plan = make_plan(
        app_of(ctx), name, zone, project, worker, internal_ip, connect_timeout
    )
    code = run_everywhere(
        ssh_api, plan, shlex.join(command), max_parallel, output_dir, connect_timeout
    )
    raise declare.Exit(code)
