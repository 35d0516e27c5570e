"""tpuctl scp SRC... DST: copy files to or from workers, NAME:path on one side."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

from tpuctl.cli import declare, render
from tpuctl.cli.options import Project, Zone, app_of
from tpuctl.cli.ssh import ConnectTimeout, InternalIp, MaxParallel, Workers, make_plan, report
from tpuctl.errors import UsageError

# `NAME:path`: a node name, then a colon before any slash (as scp tells hosts from paths)
_REMOTE = re.compile(r"^([a-z][-a-z0-9]*):(.*)$", re.S)


def _remote(arg: str) -> tuple[str, str] | None:
    """`NAME:path` -> (NAME, path relative to the home: `~/` dropped), else None."""
    match = _REMOTE.match(arg)
    if not match:
        return None
    path = match.group(2)
    if path == "~" or path.startswith("~/"):
        path = path[2:]
    return match.group(1), path


def scp(
    ctx: declare.Context,
    paths: Annotated[list[str], declare.Argument(help="SRC... DST; NAME:path names a node's.")],
    recurse: Annotated[bool, declare.Option("-r", "--recurse", help="Copy folders.")] = False,
    worker: Workers = "all",
    internal_ip: InternalIp = False,
    max_parallel: MaxParallel = 0,
    connect_timeout: ConnectTimeout = 60.0,
    zone: Zone = None,
    project: Project = None,
) -> None:
    """Copy files to or from the chosen workers (all by default).

    Remote paths are relative to the worker's home. From several workers, DST is a
    folder and each worker's files land in DST/w<K>/.

    Example: tpuctl scp -r ./code train.py my-tpu:work/
    """
    from tpuctl.services import remote

    if len(paths) < 2:
        raise UsageError("give at least one source and a destination", hint="SRC... DST")
    *sources, destination = paths
    remote_sources = [_remote(s) for s in sources]
    remote_destination = _remote(destination)
    if remote_destination and not any(remote_sources):
        name, target = remote_destination
        local = [Path(s) for s in sources]
        for path in local:
            if not path.exists():
                raise UsageError(f"{path}: no such file or folder")
            if path.is_dir() and not recurse:
                raise UsageError(f"{path} is a folder", hint="pass -r to copy folders")
        ssh_api, plan = make_plan(
            app_of(ctx), name, zone, project, worker, internal_ip, connect_timeout
        )
        results = remote.copy_to(
            ssh_api, plan, local, target, recurse, max_parallel, connect_timeout
        )
        done = f"copied {len(local)} item(s) to {len(results)} worker(s)"
    elif all(remote_sources) and not remote_destination:
        names = {r[0] for r in remote_sources if r}
        if len(names) != 1:
            raise UsageError("copy from one node at a time", hint=f"got {', '.join(sorted(names))}")
        name = names.pop()
        files = [r[1] or "." for r in remote_sources if r]
        ssh_api, plan = make_plan(
            app_of(ctx), name, zone, project, worker, internal_ip, connect_timeout
        )
        base = Path(destination)
        many = len(plan.endpoints) > 1
        if many or len(files) > 1:
            if base.exists() and not base.is_dir():
                raise UsageError(f"{base} is not a folder", hint="copying several files needs one")
            for ep in plan.endpoints:
                (base / f"w{ep.worker}" if many else base).mkdir(parents=True, exist_ok=True)
        results = remote.copy_from(
            ssh_api,
            plan,
            files,
            lambda w: base / f"w{w}" if many else base,
            recurse,
            max_parallel,
            connect_timeout,
        )
        done = f"copied from {len(results)} worker(s) to {base}" + ("/w<K>/" if many else "")
    else:
        raise UsageError(
            "one side of the copy must be NAME:path and the other local",
            hint="e.g. tpuctl scp train.py my-tpu:  or  tpuctl scp my-tpu:out.log .",
        )
    code = report(results)
    if code == 0:
        render.info(done)
    raise declare.Exit(code)
