"""What `tpuctl run` was asked, flags and a job file merged (`RunRequest`), and every rule
that turns it into the job's `RunSpec`: which flags go together, the defaults that
depend on others (restarts on spot, teardown of a node the job made), the script's place
in its work dir, the zones an existing node allows. Also what the user is told of the
node when the job ends or is interrupted (`left`, `stop`).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tpuctl import catalog
from tpuctl.agent import claims
from tpuctl.cloud import registry
from tpuctl.durations import format_duration
from tpuctl.errors import Interrupted, TpuctlError, UsageError
from tpuctl.queueing import check_slices
from tpuctl.services.run.options import BY_NAME, MAX_RESTARTS, OPTIONS, RunOptions
from tpuctl.services.run.spec import (
    DEFAULT_OUTPUTS,
    HANG_AFTER,
    HEARTBEAT_DEADLINE,
    START_DEADLINE,
    START_LEASE,
    RunSpec,
    parse_env,
)

if TYPE_CHECKING:
    from tpuctl.config import Target
    from tpuctl.services.run.runner import Runner

Blame = Callable[[str], AbstractContextManager[Any]]  # names a job file's line for a key


def no_blame(key: str) -> AbstractContextManager[Any]:
    return contextlib.nullcontext()


SPOT_RESTARTS = 3  # a spot job's --restarts when none is given: preemption is expected
# `--setup` runs as one argument of `bash -c` on every worker: Linux takes at most 128 KiB
# in one argument (MAX_ARG_STRLEN, execve(2)); a longer setup belongs in a script.
MAX_SETUP = 64 << 10


@dataclass
class RunRequest(RunOptions):
    """`tpuctl run`'s options (options.py), a job file's values merged in, and the rules
    that make them a job's spec."""

    @classmethod
    def of(cls, values: dict[str, Any]) -> RunRequest:
        """The request from the command's parameters, a flag's text read as its option's
        kind reads it (`--ttl 2h`: 7200 seconds); a job file's values are read already."""
        read = {}
        for o in OPTIONS:
            value = values.get(o.name, copy.copy(o.default))
            if isinstance(value, str) and o.kind.text is not None:
                value = o.kind.text(value, o.flag)
            read[o.name] = value
        return cls(**read)

    @property
    def shape(self) -> catalog.SliceShape:
        return catalog.shape(self.accelerator)

    @property
    def queued(self) -> bool:
        return self.queued_flag or self.slices > 1  # a multislice job is one queued resource

    @property
    def restarts_or_default(self) -> int:
        spot = self.spot or self.preemptible  # capacity that can be taken back
        return (SPOT_RESTARTS if spot else 0) if self.restarts is None else self.restarts

    def check(self, blame: Blame = no_blame, from_file: set[str] | None = None) -> None:
        """The rules between flags; a UsageError naming them (and the job file's line for
        a value that came from the file)."""
        from_file = from_file or set()
        if self.image is not None:
            self._check_image(blame, from_file)
        elif self.script is None:
            raise UsageError(
                "no script: give one (tpuctl run SCRIPT) or a job file with `script = ...` "
                "(-f FILE)"
            )
        with blame("slices") if "slices" in from_file else contextlib.nullcontext():
            check_slices(self.slices)
            if self.slices > 1 and self.node:
                raise UsageError("--slices asks for new slices: it does not go with --node")
        if self.max_run_duration and not self.flex_start:
            raise UsageError("--max-run-duration goes with --flex-start")
        if self.flex_start and self.node:
            raise UsageError("--flex-start asks for a new node: it does not go with --node")
        if self.flex_start and registry.is_auto(self.api):
            raise UsageError(
                "--flex-start waits for capacity on one API: it does not go with --api auto",
                hint=f"choose {' or '.join(k.flag for k in registry.KINDS)} "
                "(docs/compute-engine.md)",
            )
        if self.valid_until and not (self.queued or self.flex_start):
            raise UsageError("--valid-until needs --queued or --flex-start")
        if self.queued_flag and self.node:
            raise UsageError("--queued asks for a new node: it does not go with --node")
        if self.outputs is not None and self.no_outputs:
            raise UsageError("--outputs and --no-outputs are exclusive: choose one")
        with blame("restarts") if "restarts" in from_file else contextlib.nullcontext():
            if self.restarts is not None and not 0 <= self.restarts <= MAX_RESTARTS:
                raise UsageError(
                    f"invalid --restarts {self.restarts}: a whole number 0 to {MAX_RESTARTS}"
                )
        with blame("repairs") if "repairs" in from_file else contextlib.nullcontext():
            if not 0 <= self.repairs <= MAX_RESTARTS:
                raise UsageError(
                    f"invalid --repairs {self.repairs}: a whole number 0 to {MAX_RESTARTS}"
                )
        with blame("setup") if "setup" in from_file else contextlib.nullcontext():
            if self.setup is not None and len(self.setup.encode()) > MAX_SETUP:
                raise UsageError(
                    f"--setup is {len(self.setup.encode()):,} bytes: at most "
                    f"{MAX_SETUP // 1024} KiB (one shell command)",
                    hint="put a longer setup in a script in the work dir and give "
                    "--setup 'bash setup.sh'",
                )
        if not self.no_outputs:  # found now, not after the job has run (and billed)
            with blame("outputs") if "outputs" in from_file else contextlib.nullcontext():
                _check_outputs(self.outputs)

    def _check_image(self, blame: Blame, from_file: set[str]) -> None:
        """--image: a reference Artifact Registry can have, and none of the flags that
        build an environment (the image is the environment)."""
        from tpuctl.cloud.images import parse_image

        with blame("image") if "image" in from_file else contextlib.nullcontext():
            parse_image(self.image or "")
        for name in ("requirements", "rebuild_env", "system_site_packages", "setup"):
            if getattr(self, name):
                flag = BY_NAME[name].flag
                raise UsageError(
                    f"--image does not go with {flag}: the image is the environment",
                    hint="install what the job needs in the image (its Dockerfile)",
                )

    @property
    def in_image(self) -> bool:
        """--image with no SCRIPT, or one that names no file here: SCRIPT ARGS are the
        command to run in the image (none: its own ENTRYPOINT/CMD)."""
        if self.image is None:
            return False
        if self.script is None:
            return True
        path = Path(self.script)
        return not (
            path.is_file() or (self.workdir is not None and (self.workdir / path).is_file())
        )

    def located(
        self, blame: Blame = no_blame, from_file: set[str] | None = None
    ) -> tuple[Path, str]:
        """The work dir and the script's path in it ("" for a command of the image: the
        work dir then is not staged)."""
        if self.in_image:
            return (self.workdir or Path.cwd()).resolve(), ""
        with blame("script" if "script" in (from_file or set()) else "workdir"):
            return locate(str(self.script), self.workdir)

    def spec(self, root: Path, rel: str, service_account: str | None) -> RunSpec:
        """The job's spec (`service_account`: the config file's, when no flag gave one)."""
        from tpuctl.models import CreateSpec
        from tpuctl.services import names, nodes
        from tpuctl.services.run import environment

        env_spec, by_default = environment.spec_of(
            self.requirements,
            self.no_requirements or self.image is not None,
            root,
            self.rebuild_env,
            self.system_site_packages,
        )

        if (self.start_lease or 0) > claims.MAX_LEASE:
            raise UsageError(
                f"invalid --start-lease {format_duration(self.start_lease or 0)}: at most "
                f"{claims.MAX_LEASE / 3600:g}h (a node outlives its gone client by that long)"
            )
        return RunSpec(
            script=rel,
            workdir=root,
            args=self.command,
            node=self.node,
            node_spec=CreateSpec(
                name="",  # the job's node's, given per attempt
                shape=self.shape,
                version=self.version,
                spot=self.spot,
                preemptible=self.preemptible,
                reserved=self.reserved,
                reservation=self.reservation,
                labels=names.parse_labels(list(self.labels or [])),
                network=self.network,
                subnetwork=self.subnetwork,
                tags=names.parse_tags(list(self.tags or [])),
                internal_ip_only=self.internal_ip_only,
                service_account=self.service_account or service_account,
                scopes=nodes.parse_scopes(list(self.scopes or [])),
                ttl=self.ttl,
                max_cost=self.max_cost,
            ),
            api=self.api,
            excludes=list(self.exclude),
            bucket=self.bucket,
            env=parse_env(self.env_pairs, self.env_file),
            setup=self.setup,
            # home by default, into ./outputs/<job id> (the VM's disk goes with the node)
            outputs=None if self.no_outputs else self.outputs or Path(DEFAULT_OUTPUTS),
            outputs_per_job=not self.no_outputs and self.outputs is None,
            # an existing node is kept unless asked; a node the job makes goes with it
            teardown=None if self.teardown is None and self.node else self.teardown is not False,
            detach=self.detach,
            name=self.name,
            queued=self.queued,
            slices=self.slices,
            valid_until=self.valid_until,
            flex_start=self.flex_start,
            max_run_duration=self.max_run_duration,
            restarts=self.restarts_or_default,
            repairs=self.repairs,
            retry_on_failure=self.retry_on_failure,
            sync_every=self.sync_every,
            hang_after=HANG_AFTER if self.hang_after is None else self.hang_after,
            start_deadline=self.start_deadline or START_DEADLINE,
            start_lease=self.start_lease or START_LEASE,
            heartbeat_deadline=self.heartbeat_deadline or HEARTBEAT_DEADLINE,
            environment=env_spec,
            environment_by_default=by_default,
            image=self.image,
        )

    @property
    def command(self) -> list[str]:
        """The script's args; for a command of the image, the whole command."""
        args = list(self.script_args or [])
        return [self.script, *args] if self.in_image and self.script else args

    def place(self, target: Target) -> Target:
        """The zones the job may use: an existing node's is its one zone."""
        if self.node and len(target.candidates) > 1:
            if target.zone_source == "--zone":
                raise UsageError("--node names a node in one zone: give one --zone with it")
            return dataclasses.replace(target, zones=())
        return target


def _check_outputs(flag: Path | None) -> None:
    """Refuse a folder the outputs could not be downloaded to: one that is a file, or
    below a file, or that cannot be made or written (tried: services/outputs.py)."""
    from tpuctl.services import outputs

    problem = outputs.unwritable(flag or Path(DEFAULT_OUTPUTS))
    if problem and flag is not None:
        raise UsageError(f"invalid --outputs {flag}: {problem}", hint="give a folder you can write")
    if problem:
        raise UsageError(
            f"cannot bring the outputs home to ./{DEFAULT_OUTPUTS}: {problem}",
            hint="pass --outputs DIR, or --no-outputs to leave them in the bucket",
        )


def locate(script: str, workdir: Path | None) -> tuple[Path, str]:
    """(work dir, script path relative to it)."""
    path = Path(script)
    if workdir is None:
        if path.is_dir():
            raise UsageError(
                f"script {script} is a folder: give the file to run in it (a .py file or "
                f"an executable), e.g. tpuctl run {Path(script, 'train.py')}"
            )
        if path.exists() and not path.is_file():  # /dev/null, a pipe, a socket
            raise UsageError(
                f"script {script} is not a regular file: give a Python script or an "
                "executable (a .py file, or a file with #!), or the folder of code with --workdir"
            )
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


def left(runner: Runner, zone: str) -> str:
    """What becomes of the node, said only as far as it is known."""
    job = runner.job
    node = f"{job.what} in {zone}"
    if job.node_deleted:
        return f"{node} was deleted"
    if job.delete_asked:
        return f"{node} is being deleted (the cloud has the request)"
    if not job.spec.teardown:
        return f"{node} keeps running"
    if job.agents_started and 0 not in job.lost:
        return f"{node} will be deleted by its agent when the job ends"
    return f"{node} may still be billing"


def stop(runner: Runner, zone: str, flush: Callable[[], None]) -> Interrupted:
    """After a Ctrl-C (SIGTERM, SIGHUP): stop what runs, and the `Interrupted` (exit 130)
    saying what is left; a second Ctrl-C while stopping leaves at once, saying so."""
    job = runner.job
    hint = (
        f"`tpuctl cancel {runner.job_id}` stops it; "
        f"`tpuctl delete {runner.node_name} --zone {zone}` deletes the node"
    )
    try:
        flush()
        stopped = runner.stop()
    except KeyboardInterrupt:
        if not job.agents_started:
            return Interrupted(f"left at once; {left(runner, zone)}", hint=hint)
        return Interrupted(
            f"left at once: job {runner.job_id} may still run; {left(runner, zone)}",
            hint=f"{hint}; {fetch_outputs(runner.job_id)} once it ends",
        )
    if not stopped.started:
        what = left(runner, zone) if job.created else "no node was created"
        delete = f"`tpuctl delete {runner.node_name} --zone {zone}` deletes it"
        hints = [delete] if what.endswith("may still be billing") else []
        if job.ran:  # stopped while its node was made again: earlier attempts synced some
            hints.append(fetch_outputs(job.job_id))
        when = "restarted" if job.ran else "started"
        return Interrupted(
            f"interrupted before job {runner.job_id} {when}; {what}",
            hint="; ".join(hints) or None,
        )
    what = "every slice" if job.multislice else "its node"
    gone = f" and deleted {what}" if stopped.torn_down else ""
    said = f"interrupted: stopped job {runner.job_id}{gone}"
    try:  # what the job synced before it stopped comes home as on any other end
        outputs = runner.bring_outputs()
    except (KeyboardInterrupt, TpuctlError):
        return Interrupted(
            f"{said}; its outputs were not downloaded", hint=fetch_outputs(job.job_id)
        )
    if outputs is None:
        return Interrupted(said, hint=fetch_outputs(job.job_id))
    if job.outputs_missed:
        return Interrupted(f"{said}; {job.outputs_missed}")
    if outputs:
        said += f"; downloaded {len(outputs)} output file(s) to {job.outputs_dir}"
    else:
        said += "; no outputs: the job had synced none"
    return Interrupted(said)


def fetch_outputs(job_id: str) -> str:
    """The command that brings a job's outputs home, said where tpuctl did not."""
    return f"`tpuctl outputs {job_id}` fetches its outputs"
