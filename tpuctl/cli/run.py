"""tpuctl run SCRIPT [-- ARGS...]: the main job."""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Annotated, Any

import typer

from tpuctl import interrupts
from tpuctl.catalog import DEFAULT_ACCELERATOR
from tpuctl.cli import checkup, render
from tpuctl.cli.options import Accelerator, Json, Project, Zone, app_of
from tpuctl.errors import Interrupted, JobFailed, UsageError


class CliUI:
    """Progress on stderr; the job's log lines on stdout, prefixed per worker on pods."""

    def __init__(self, logs_to_stderr: bool = False) -> None:
        self.prefix = False
        self.partial: dict[int, bytes] = {}
        # with --json, stdout carries only the final JSON object
        self.stream = sys.stderr if logs_to_stderr else sys.stdout

    def set_workers(self, count: int) -> None:
        self.prefix = count > 1

    def info(self, message: str) -> None:
        render.info(message)

    def progress(self, label: str) -> AbstractContextManager[Any]:
        return render.progress(label)

    def log(self, worker: int, data: bytes) -> None:
        buf = self.partial.get(worker, b"") + data
        *lines, rest = buf.split(b"\n")
        self.partial[worker] = rest
        out = self.stream.buffer
        for line in lines:
            out.write((f"[w{worker}] ".encode() if self.prefix else b"") + line + b"\n")
        out.flush()

    def log_marker(self, text: str) -> None:
        self.flush()
        self.stream.buffer.write(text.encode() + b"\n")
        self.stream.buffer.flush()

    def flush(self) -> None:
        for worker, rest in sorted(self.partial.items()):
            if rest:
                self.log(worker, b"\n")


def parse_env(pairs: list[str], env_file: Path | None) -> dict[str, str]:
    values: dict[str, str] = {}
    if env_file is not None:
        try:
            text = env_file.read_text()
        except OSError as e:
            raise UsageError(f"cannot read --env-file {env_file}: {e.strerror}") from e
        except UnicodeDecodeError:
            raise UsageError(f"cannot read --env-file {env_file}: not UTF-8 text") from None
        for n, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, sep, value = line.removeprefix("export ").partition("=")
            if not sep or not key.strip().isidentifier():
                raise UsageError(f"{env_file}:{n}: expected KEY=VALUE")
            values[key.strip()] = value.strip().strip("'\"")
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.isidentifier():
            raise UsageError(f"invalid --env {pair!r}: expected KEY=VALUE")
        values[key] = value
    return values


def locate(script: str, workdir: Path | None) -> tuple[Path, str]:
    """(work dir, script path relative to it)."""
    path = Path(script)
    if workdir is None:
        if not path.is_file():
            raise UsageError(f"script {script} not found", hint="give the path to a file")
        return path.resolve().parent, path.name
    root = workdir.resolve()
    if not root.is_dir():
        raise UsageError(f"--workdir {workdir} is not a folder")
    for candidate in (path.resolve(), (root / path).resolve()):
        if candidate.is_file() and candidate.is_relative_to(root):
            return root, candidate.relative_to(root).as_posix()
    raise UsageError(f"script {script} is not a file inside the work dir {root}")


def _left(runner: Any, zone: str) -> str:
    """What becomes of the node, said only as far as it is known."""
    job = runner.job
    node = f"node {runner.node_name} in {zone}"
    if job.node_deleted:
        return f"{node} was deleted"
    if not job.spec.teardown:
        return f"{node} keeps running"
    if job.agents_started and 0 not in job.lost:
        return f"{node} will be deleted by its agent when the job ends"
    return f"{node} may still be billing"


def _stop(runner: Any, ui: CliUI, zone: str) -> None:
    """After a Ctrl-C (SIGTERM, SIGHUP): stop what runs, then say what is left; always
    an `Interrupted` (exit 130), a second Ctrl-C included."""
    job = runner.job
    hint = (
        f"`tpuctl cancel {runner.job_id}` stops it; "
        f"`tpuctl delete {runner.node_name} --zone {zone}` deletes the node"
    )
    try:
        ui.flush()
        stopped = runner.stop()
    except KeyboardInterrupt:
        if not job.agents_started:
            raise Interrupted(f"left at once; {_left(runner, zone)}", hint=hint) from None
        raise Interrupted(
            f"left at once: job {runner.job_id} may still run; {_left(runner, zone)}", hint=hint
        ) from None
    if not stopped.started:
        what = _left(runner, zone) if job.created else "no node was created"
        raise Interrupted(f"interrupted before job {runner.job_id} started; {what}") from None
    gone = " and deleted its node" if stopped.torn_down else ""
    raise Interrupted(f"interrupted: stopped job {runner.job_id}{gone}") from None


def run(
    ctx: typer.Context,
    script: Annotated[str, typer.Argument(help="A .py file (run with python3) or an executable.")],
    script_args: Annotated[
        list[str] | None, typer.Argument(help="Arguments for the script, after --.")
    ] = None,
    node: Annotated[str | None, typer.Option("--node", help="Use (or create) this node.")] = None,
    accelerator: Accelerator = DEFAULT_ACCELERATOR,
    version: Annotated[str | None, typer.Option("--version", help="Runtime version.")] = None,
    spot: Annotated[bool, typer.Option("--spot", help="Spot capacity.")] = False,
    workdir: Annotated[
        Path | None, typer.Option("--workdir", help="Folder to ship (default: the script's).")
    ] = None,
    exclude: Annotated[
        list[str], typer.Option("--exclude", help="gitignore-style; repeatable.")
    ] = [],  # noqa: B006
    bucket: Annotated[
        str | None, typer.Option("--bucket", help="gs://BUCKET (default gs://PROJECT-tpuctl).")
    ] = None,
    env_pairs: Annotated[
        list[str], typer.Option("--env", help="KEY=VALUE for the script; repeatable.")
    ] = [],  # noqa: B006
    env_file: Annotated[Path | None, typer.Option("--env-file", help="KEY=VALUE lines.")] = None,
    setup: Annotated[
        str | None, typer.Option("--setup", help="Shell command run once per worker first.")
    ] = None,
    outputs: Annotated[
        Path | None, typer.Option("--outputs", help="Download outputs here at the end.")
    ] = None,
    teardown: Annotated[
        bool | None,
        typer.Option(
            "--teardown/--keep",
            help="Delete the node at the end (default: only a node created for the job).",
        ),
    ] = None,
    detach: Annotated[bool, typer.Option("--detach", help="Return once the job started.")] = False,
    name: Annotated[str | None, typer.Option("--name", help="A name for the job.")] = None,
    ttl: Annotated[
        str | None, typer.Option("--ttl", help="Node expiry for `tpuctl gc` (default 7d).")
    ] = None,
    start_deadline: Annotated[
        str | None,
        typer.Option(
            "--start-deadline",
            help="A node made for the job deletes itself when its agents have not started "
            "by then (default 10m).",
        ),
    ] = None,
    queued_flag: Annotated[
        bool, typer.Option("--queued", help="Ask for the node through a queued resource.")
    ] = False,
    valid_until: Annotated[
        str | None, typer.Option("--valid-until", help="With --queued: give up waiting after this.")
    ] = None,
    restarts: Annotated[
        int | None,
        typer.Option(
            "--restarts",
            min=0,
            help="Recreate the node and restart after a preemption at most N times "
            "(default: 3 with --spot, else 0).",
        ),
    ] = None,
    retry_on_failure: Annotated[
        bool, typer.Option("--retry-on-failure", help="A failed script counts as restartable.")
    ] = False,
    sync_every: Annotated[
        float,
        typer.Option("--sync-every", min=1.0, help="Seconds between output uploads (checkpoints)."),
    ] = 30.0,
    force: Annotated[
        bool, typer.Option("--force", help="Run even when `tpuctl doctor` finds errors.")
    ] = False,
    no_check: Annotated[
        bool, typer.Option("--no-check", help="Skip the `tpuctl doctor` check of the script.")
    ] = False,
    heartbeat_deadline: Annotated[
        str | None,
        typer.Option(
            "--heartbeat-deadline",
            help="An agent silent this long is lost: the job ends (default 60s).",
        ),
    ] = None,
    zone: Zone = None,
    project: Project = None,
    json_out: Json = False,
) -> None:
    """Run a script on a TPU VM: stage it, run it on every worker, stream logs, tear down.

    Example: tpuctl run examples/train.py --accelerator v3-8 --outputs out/ -- --steps 200
    """
    from tpuctl.config import load_config_file
    from tpuctl.durations import parse_duration
    from tpuctl.services import staging
    from tpuctl.services.run.runner import Adapters, Runner, RunSpec
    from tpuctl.services.run.spec import HEARTBEAT_DEADLINE, START_DEADLINE

    if valid_until and not queued_flag:
        raise UsageError("--valid-until needs --queued")
    if queued_flag and node:
        raise UsageError("--queued asks for a new node: it does not go with --node")
    root, rel = locate(script, workdir)
    if not no_check:  # before anything is created: a mistake found here costs no TPU time
        checkup.gate(root, rel, accelerator, force)
    spec = RunSpec(
        script=rel,
        workdir=root,
        args=list(script_args or []),
        node=node,
        accelerator=accelerator,
        version=version,
        spot=spot,
        excludes=list(exclude),
        bucket=bucket,
        env=parse_env(env_pairs, env_file),
        setup=setup,
        outputs=outputs,
        teardown=(node is None) if teardown is None else teardown,
        detach=detach,
        name=name,
        ttl=parse_duration(ttl, "--ttl") if ttl else None,
        queued=queued_flag,
        valid_until=parse_duration(valid_until, "--valid-until") if valid_until else None,
        restarts=(3 if spot else 0) if restarts is None else restarts,
        retry_on_failure=retry_on_failure,
        sync_every=sync_every,
        start_deadline=(
            parse_duration(start_deadline, "--start-deadline") if start_deadline else START_DEADLINE
        ),
        heartbeat_deadline=(
            parse_duration(heartbeat_deadline, "--heartbeat-deadline")
            if heartbeat_deadline
            else HEARTBEAT_DEADLINE
        ),
    )
    app = app_of(ctx)
    target = app.target(project, zone)
    # --bucket, else the config file's `bucket`, else the default: as `jobs` finds it.
    spec.bucket = staging.bucket_name(bucket, load_config_file(), target.project)
    factory = app.factory
    adapters = Adapters(
        tpu=factory.tpu(),
        ssh=factory.ssh(),
        bucket=lambda b: factory.bucket(b, target.project),
        quotas=factory.quotas(),
    )
    ui = CliUI(logs_to_stderr=json_out)
    runner = Runner(adapters, target, spec, ui)

    replaced = interrupts.install()  # SIGINT, SIGTERM, SIGHUP alike, until the end
    try:
        try:
            outcome = runner.run()
        except KeyboardInterrupt:
            _stop(runner, ui, target.zone)
    finally:
        interrupts.restore(replaced)
    ui.flush()
    where = f"gs://{runner.bucket.name if runner.bucket else '?'}/tpuctl/jobs/{outcome.job_id}/"
    if spec.detach:
        if json_out:
            render.print_json({"job": outcome.job_id, "node": outcome.node, "bucket": where})
        else:
            left = _left(runner, target.zone)
            render.info(f"job {outcome.job_id} started on {outcome.node}; {left}")
            render.info(f"follow it: tpuctl logs {outcome.job_id} -f")
        return
    summary = ", ".join(f"w{w} {s}" for w, s in sorted(outcome.states.items()))
    restarted = f" after {outcome.restarts} restart(s)" if outcome.restarts else ""
    render.info(f"job {outcome.job_id}: {summary}{restarted}; exit status {outcome.exit_status}")
    render.info(f"logs and outputs: {where}")
    if outcome.outputs:
        render.info(f"downloaded {len(outcome.outputs)} output file(s) to {spec.outputs}")
    if outcome.torn_down:
        render.info(f"deleted node {outcome.node}")
    if json_out:
        render.print_json(
            {
                "job": outcome.job_id,
                "node": outcome.node,
                "exitStatus": outcome.exit_status,
                "states": outcome.states,
                "bucket": where,
            }
        )
    if outcome.message:
        raise JobFailed(outcome.message, hint=f"see `tpuctl logs {outcome.job_id}`")
    if outcome.exit_status:
        raise typer.Exit(outcome.exit_status)
