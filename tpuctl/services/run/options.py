"""`tpuctl run`'s options, each declared once: a field of `RunOptions` with its type (what
the request holds: durations in seconds, dollars, paths), default, flag, help, the kind of
value it takes (kinds.py) and its job-file key. From these come the command's parameters
(tpuctl/cli/run_params.py), the request (`RunRequest` is `RunOptions` with its rules), the
job file's keys and checks (jobfile.py) and the help's value names.

A new option is one `option(...)` field here, plus the code that uses its value.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tpuctl.catalog import DEFAULT_ACCELERATOR
from tpuctl.services.run import kinds
from tpuctl.services.run.kinds import (
    ACCELERATOR,
    API,
    BOOL,
    COUNT,
    DOLLARS,
    DURATION,
    ENV,
    PATH,
    PATHS,
    PROJECT,
    SECONDS,
    STRING,
    STRINGS,
    WAIT,
    ZONE,
    Kind,
)

MAX_RESTARTS = 100  # a node recreated more often than this is a loop, not a job
# the script as named (a job file's, from the file's folder), not made a Path: as typed
# (a bare name that is no file there, `python3`, is kept as written: with `image`, the
# command to run in the image)
SCRIPT = Kind(PATH.wanted, lambda _, v, base, key: _script(v, base, key), show=kinds.shown_path)


def _script(value: Any, base: Path, key: str) -> str:
    path = PATH.read(value, base, key)
    bare = isinstance(value, str) and "/" not in value
    return str(value) if bare and not path.exists() else str(path)


@dataclass(frozen=True)
class RunOption:
    """One option of `tpuctl run`, as declared by `option()` (its `name` is the field's)."""

    kind: Kind
    default: Any = None
    help: str = ""
    flags: tuple[str, ...] = ()  # default: --NAME, `_` as `-` (a shared one's: its first)
    key: str | None = ""  # its job file key (default: the name); None: not in a job file
    shared: str | None = None  # the CLI's option another command shares (tpuctl/cli)
    metavar: str | None = None  # what it takes, in the help (default: the kind's)
    argument: bool = False  # a positional argument, not a flag
    # --print-spec writes it even at its default: what the job would otherwise get from
    # this tpuctl's defaults, which a teammate's may not share
    always: bool = False
    name: str = ""

    @property
    def flag(self) -> str:
        return self.flags[0] if self.flags else "--" + self.name.replace("_", "-")


def option(kind: Kind, default: Any = None, help: str = "", **declared: Any) -> Any:
    """A field of RunOptions declaring its option."""
    meta = {"option": RunOption(kind, default, help, **declared)}
    if isinstance(default, list):
        return dataclasses.field(default_factory=list, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


# The order is the help's and the one a job file is written in.
@dataclass
class RunOptions:
    """What `tpuctl run` was asked: flags, and a job file's values under them."""

    script: str | None = option(
        SCRIPT,
        help="A .py file (run with python3) or an executable (or `script` in -f FILE); "
        "with --image, optional: a file of the work dir runs in the image, anything else "
        "is the command to run in it (`tpuctl run --image IMAGE -- python3 -c 'print(1)'`), "
        "none: the image's own ENTRYPOINT/CMD.",
        argument=True,
    )
    script_args: list[str] | None = option(
        STRINGS, None, "Arguments for the script, after --.", argument=True, key="args"
    )
    accelerator: str = option(ACCELERATOR, DEFAULT_ACCELERATOR, shared="Accelerator", always=True)
    api: str | None = option(API, shared="RunApi")  # a registry key, auto; None: choose_api
    zone: str | None = option(ZONE, shared="Zones")  # also `zones`, a list: jobfile.py
    project: str | None = option(PROJECT, shared="Project")
    spot: bool = option(BOOL, False, shared="Spot", always=True)
    service_account: str | None = option(STRING, shared="ServiceAccount")
    scopes: list[str] = option(STRINGS, [], shared="Scopes")
    preemptible: bool = option(BOOL, False, shared="Preemptible")
    reserved: bool = option(BOOL, False, shared="Reserved")
    reservation: str | None = option(STRING, shared="Reservation")
    labels: list[str] = option(STRINGS, [], shared="Labels")
    network: str | None = option(STRING, shared="Network")
    subnetwork: str | None = option(STRING, shared="Subnetwork")
    tags: list[str] = option(STRINGS, [], shared="Tags")
    internal_ip_only: bool = option(BOOL, False, shared="InternalIpOnly")
    queued_flag: bool = option(BOOL, False, shared="Queued", key="queued", flags=("--queued",))
    slices: int = option(COUNT, 1, shared="Slices")
    valid_until: int | None = option(DURATION, shared="ValidUntil")
    flex_start: bool = option(BOOL, False, shared="FlexStart")
    max_run_duration: int | None = option(DURATION, shared="MaxRunDuration")
    version: str | None = option(STRING, shared="Version")
    node: str | None = option(STRING, help="Use (or create) this node.")
    name: str | None = option(STRING, help="A name for the job.")
    workdir: Path | None = option(
        PATH, help="Folder to ship (default: the script's).", metavar="DIR"
    )
    image: str | None = option(
        STRING,
        help="Run in this container image (LOCATION-docker.pkg.dev/PROJECT/REPO/IMAGE"
        "[:TAG|@sha256:DIGEST]), resolved once to its digest, pulled by every worker with "
        "the VM's account: the image is the environment (no --requirements, --setup).",
        metavar="IMAGE",
    )
    exclude: list[str] = option(STRINGS, [], "gitignore-style; repeatable.", metavar="PATTERN")
    setup: str | None = option(STRING, help="Shell command run once per worker first.")
    requirements: Path | None = option(
        PATH,
        help="Requirements (requirements.txt, a lock file, pyproject.toml, uv.lock) "
        "built once, cached in the bucket, installed in a venv on every worker "
        "(default: the work dir's requirements.txt, if any).",
    )
    no_requirements: bool = option(BOOL, False, "No environment, even with a requirements.txt.")
    rebuild_env: bool = option(BOOL, False, "Resolve and build the environment again.")
    system_site_packages: bool = option(
        BOOL, False, "The venv sees the image's packages (e.g. its jax)."
    )
    env_file: list[Path] = option(PATHS, [], "KEY=VALUE lines; repeatable.", metavar="FILE")
    outputs: Path | None = option(
        PATH, help="Download outputs here at the end (default outputs/JOB).", metavar="DIR"
    )
    no_outputs: bool = option(BOOL, False, "Leave the outputs in the bucket only.")
    bucket: str | None = option(STRING, help="gs://BUCKET (default gs://PROJECT-tpuctl).")
    restarts: int | None = option(
        kinds.counted(MAX_RESTARTS),
        help="Recreate the node and restart after a preemption at most N times "
        "(default: 3 with --spot, else 0).",
        always=True,
    )
    repairs: int = option(
        kinds.counted(MAX_RESTARTS),
        1,
        "Replace a node whose TPU does not come up, and resume, at most N times (default 1).",
    )
    retry_on_failure: bool = option(BOOL, False, "A failed script counts as restartable.")
    sync_every: float = option(
        SECONDS, 30.0, "Time between output uploads (checkpoints), e.g. 5m (default 30s)."
    )
    hang_after: float | None = option(
        WAIT,
        help="No output and idle chips this long is reported as a hang (default 10m; 0: off).",
    )
    ttl: int | None = option(DURATION, shared="Ttl")
    max_cost: float | None = option(DOLLARS, shared="MaxCost")
    start_deadline: int | None = option(
        DURATION,
        help="A node made for the job deletes itself when its agents have not started "
        "by then and its client never renewed its lease (default 10m).",
    )
    start_lease: int | None = option(
        DURATION,
        help="Until the agents start, the client renews a lease this long; a node made "
        "for the job whose client stopped renewing deletes itself (default 90s, at most 1h).",
    )
    heartbeat_deadline: int | None = option(
        DURATION, help="An agent silent this long is lost: the job ends (default 60s)."
    )
    teardown: bool | None = option(
        BOOL,
        help="Delete the node at the end (default: only a node created for the job).",
        flags=("--teardown/--keep",),
    )
    detach: bool = option(BOOL, False, "Return once the job started.")
    force: bool = option(BOOL, False, "Run even when `tpuctl doctor` finds errors.")
    no_check: bool = option(BOOL, False, "Skip the `tpuctl doctor` check of the script.")
    env_pairs: list[str] = option(
        ENV,
        [],
        "KEY=VALUE for the script; repeatable.",
        flags=("--env",),
        key="env",
        metavar="NAME=VALUE",
    )
    json_out: bool = option(BOOL, False, shared="Json", key=None, flags=("--json",))
    file: Path | None = option(
        PATH,
        help="A job file (TOML) with these options; flags given win.",
        flags=("--file", "-f"),
        key=None,
        metavar="FILE",
    )
    print_spec: bool = option(BOOL, False, "Print the job file for these flags and exit.", key=None)


def _declared() -> tuple[RunOption, ...]:
    return tuple(
        dataclasses.replace(o, name=f.name, key=f.name if o.key == "" else o.key)
        for f in dataclasses.fields(RunOptions)
        for o in [f.metadata["option"]]
    )


OPTIONS = _declared()
BY_NAME = {o.name: o for o in OPTIONS}
