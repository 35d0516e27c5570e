"""Shell completion (`tpuctl --install-completion`): node names, zones, accelerator
types and job ids, through click's shell completion (bash, zsh and fish).

Zones and types come from tpuctl's catalogue; node names and job ids from the cloud,
kept for a short while in the state dir so that a TAB stays fast. A completion never
prints an error: when the cloud cannot be asked, it offers nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from typing import Any

from tpuctl.cli import declare

CACHE_SECONDS = 30.0
CACHE_FILE = "completion.json"


def zones(incomplete: str) -> list[str]:
    from tpuctl import catalog

    return [z for z in catalog.ZONES if z.startswith(incomplete)]


def accelerators(incomplete: str) -> list[str]:
    from tpuctl import catalog

    return [n for n in catalog.ACCELERATOR_TYPES if n.startswith(incomplete.lower())]


def node_names(ctx: declare.Context, incomplete: str) -> list[str]:
    """Nodes (and queued requests) in the zone the command line names or resolves to."""

    def fetch(project: str | None, zone: str | None) -> list[str]:
        from tpuctl.errors import TpuctlError

        factory, target = _where(project, zone, need_zone=True)
        names: list[str] = []
        for api in factory.backends():  # every API's nodes; one that is off has none
            with contextlib.suppress(TpuctlError):
                names += [n.name for n in api.list_nodes(target.parent)]
                names += [q.name for q in api.list_queued_resources(target.parent)]
        return sorted(set(names))

    return _cached("nodes", ctx, incomplete, fetch)


def job_ids(ctx: declare.Context, incomplete: str) -> list[str]:
    """Job ids in the job bucket, newest first; none from a default bucket another project
    owns (checked as `tpuctl jobs` checks it: two small reads more, once per listing
    kept for CACHE_SECONDS)."""

    def fetch(project: str | None, zone: str | None) -> list[str]:
        from tpuctl.config import load_config_file
        from tpuctl.services import records, staging

        factory, target = _where(project, None, need_zone=False)
        flag, config = ctx.params.get("bucket"), load_config_file()
        name = staging.bucket_name(flag, config, target.project)
        bucket = factory.bucket(name, target.project)
        if not staging.bucket_source(flag, config, target.project):  # (named: trusted)
            # its refusal is an error, which a TAB never shows: it offers nothing (_cached)
            staging.check_owner(
                bucket, target.project, factory.iam().project_number, "", lambda _: None
            )
        return list(reversed(records.list_job_ids(bucket)))

    return _cached("jobs", ctx, incomplete, fetch)


def _where(project: str | None, zone: str | None, need_zone: bool) -> tuple[Any, Any]:
    """The client factory and the target a command with these flags would use."""
    from tpuctl.cloud.clients import ClientFactory
    from tpuctl.target_resolution import resolve_target

    factory = ClientFactory()
    return factory, resolve_target(
        project, zone, endpoint_defaults=factory.defaults, need_zone=need_zone
    )


def _cached(
    kind: str,
    ctx: declare.Context,
    incomplete: str,
    fetch: Callable[[str | None, str | None], list[str]],
) -> list[str]:
    project, zone = ctx.params.get("project"), ctx.params.get("zone")
    try:
        from tpuctl.cloud.clients import ClientFactory
        from tpuctl.config import state_dir

        # per endpoint: the emulator's names are not the cloud's (the factory alone knows it)
        key = "|".join((kind, ClientFactory().tpu_endpoint, project or "", zone or ""))

        path = state_dir() / CACHE_FILE
        cache: dict[str, Any] = _read(path)
        entry = cache.get(key)
        if entry and time.time() - float(entry["at"]) < CACHE_SECONDS:
            values = list(entry["values"])
        else:
            values = fetch(project, zone)
            cache[key] = {"at": time.time(), "values": values}
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{CACHE_FILE}.{os.getpid()}")
            tmp.write_text(json.dumps(cache))
            os.replace(tmp, path)
    except Exception:  # noqa: BLE001 - a TAB must never show an error or a traceback
        return []
    return [v for v in values if v.startswith(incomplete)]


def _read(path: Any) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


SHELLS = {  # the file each shell reads a completion script from, and a line that loads it
    "bash": (".bash_completions/tpuctl.sh", ".bashrc", "source ~/.bash_completions/tpuctl.sh"),
    "zsh": (".zfunc/_tpuctl", ".zshrc", "fpath+=~/.zfunc; autoload -Uz compinit; compinit"),
    "fish": (".config/fish/completions/tpuctl.fish", None, None),
}


def _script(ctx: declare.Context) -> tuple[str, str]:
    """The shell tpuctl runs from ($SHELL) and click's completion script for it."""
    from click.shell_completion import get_completion_class

    shell = os.path.basename(os.environ.get("SHELL", ""))
    made = get_completion_class(shell) if shell in SHELLS else None
    if made is None:
        raise declare.BadParameter(f"no completion for the shell {shell!r}: bash, zsh or fish")
    root = ctx.find_root()
    return shell, made(root.command, {}, "tpuctl", "_TPUCTL_COMPLETE").source()


def show(ctx: declare.Context, param: Any, value: bool) -> None:
    """`--show-completion`: print the script."""
    if value and not ctx.resilient_parsing:
        declare.echo(_script(ctx)[1])
        raise declare.Exit(0)


def install(ctx: declare.Context, param: Any, value: bool) -> None:
    """`--install-completion`: write the script where the shell finds it, and the line
    that loads it into the shell's startup file (once)."""
    if not value or ctx.resilient_parsing:
        return
    from pathlib import Path

    shell, text = _script(ctx)
    where, rc, line = SHELLS[shell]
    path = Path.home() / where
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    if rc and line:
        startup = Path.home() / rc
        held = startup.read_text() if startup.exists() else ""
        if line not in held:
            with startup.open("a") as out:
                out.write(f"\n{line}\n")
    declare.echo(f"{shell} completion installed in {path}")
    declare.echo("Completion will take effect once you restart the terminal")
    raise declare.Exit(0)
