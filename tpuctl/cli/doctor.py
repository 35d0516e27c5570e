"""tpuctl doctor SCRIPT | NODE: the static checks of a training script, or the
troubleshooting chain on a live node (docs/doctor.md)."""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

from tpuctl.cli import declare, render
from tpuctl.cli.doctor_gate import lines
from tpuctl.cli.options import Json, Project, Zone, app_of
from tpuctl.errors import UsageError

_NODE_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")


def _accelerator(name: str):  # noqa: ANN202 - SliceShape, imported lazily
    from tpuctl import catalog

    acc = catalog.shape(name)
    if not acc.known:
        raise UsageError(f"unknown accelerator {name!r}", hint="e.g. v3-8, v4-32, v5litepod-8")
    return acc


def is_node(target: str, workdir: Path | None, node_flag: bool) -> bool:
    """A script (a file, or a path with `/` or `.py`) or a node name; a usage error when
    it is neither, or both (a file here whose name is a node name too)."""
    if node_flag:
        if not _NODE_NAME.match(target):
            raise UsageError(
                f"--node: {target!r} is not a node name (lowercase letters, digits, -)"
            )
        return True
    looks_like_path = "/" in target or "." in target
    exists = Path(target).is_file() or (workdir is not None and (workdir / target).is_file())
    if looks_like_path or (exists and not _NODE_NAME.match(target)):
        return False
    if exists:
        raise UsageError(
            f"{target!r} is a file here and could be a node name too",
            hint=f"write ./{target} for the script, or --node {target} for the node",
        )
    if _NODE_NAME.match(target):
        return True
    raise UsageError(
        f"{target!r} is neither a file nor a node name",
        hint="give a training script (train.py) or a node name (lowercase letters, digits, -)",
    )


def doctor(
    ctx: declare.Context,
    target: Annotated[
        str | None, declare.Argument(help="A training script (.py), or a node name.")
    ] = None,
    accelerator: Annotated[
        str, declare.Option("--accelerator", "-a", help="Script: the slice it will run on.")
    ] = "v3-8",
    workdir: Annotated[
        Path | None,
        declare.Option("--workdir", help="Script: the folder shipped (default: its own)."),
    ] = None,
    version: Annotated[
        str | None,
        declare.Option("--version", help="Script: the runtime version (default: the base image)."),
    ] = None,
    setup: Annotated[
        str | None, declare.Option("--setup", help="Script: the --setup command the run will use.")
    ] = None,
    requirements: Annotated[
        Path | None,
        declare.Option(
            "--requirements",
            help="Script: the run's --requirements (default: the work dir's requirements.txt).",
        ),
    ] = None,
    no_requirements: Annotated[
        bool, declare.Option("--no-requirements", help="Script: the run has no environment.")
    ] = False,
    node_flag: Annotated[
        bool, declare.Option("--node", help="TARGET is a node name (when a file has its name).")
    ] = False,
    zone: Zone = None,
    project: Project = None,
    bucket: Annotated[
        str | None,
        declare.Option("--bucket", help="Node: the job bucket (default gs://PROJECT-tpuctl)."),
    ] = None,
    paths: Annotated[
        list[str] | None,
        declare.Option("--path", help="Node: a gs:// path the VM must read (repeatable)."),
    ] = None,
    fix: Annotated[
        bool, declare.Option("--fix", help="Node: repair what is safe; ask before the rest.")
    ] = False,
    yes: Annotated[
        bool, declare.Option("--yes", "-y", help="Node: agree to every repair.")
    ] = False,
    image: Annotated[
        str | None,
        declare.Option("--image", help="Check a container image (Artifact Registry) instead."),
    ] = None,
    service_account: Annotated[
        str | None,
        declare.Option(
            "--service-account",
            help="Image: the nodes' service account (default: the project's compute account).",
        ),
    ] = None,
    json_out: Json = False,
) -> None:
    """Check a script for GPU-to-TPU mistakes, or troubleshoot a node.

    For a script: the mistakes of moving from GPUs to TPUs, before a node bills (one
    line per finding and its fix). For a node: the troubleshooting chain, state and
    health, SSH, TPU devices, libtpu lockfile, processes holding the TPU, frameworks,
    Storage access, disk and memory, the last job. For --image: its Python's TPU
    runtime (its layers read whole), and whether the nodes' service account may pull it.

    Exit status 1 when a finding is an error, or a check of the node fails.
    Examples: tpuctl doctor train.py -a v4-8 --version tpu-vm-tf-2.16.0-pjrt;
    tpuctl doctor my-tpu --fix; tpuctl doctor --image us-docker.pkg.dev/P/R/trainer:v1
    """
    if image is not None or target is None:
        if target is not None or image is None:
            raise UsageError("give a training script, a node name or --image IMAGE (one of them)")
        from tpuctl.cli.doctor_image import doctor_image

        doctor_image(app_of(ctx), image, project, service_account, json_out)
        return
    if service_account:
        raise UsageError("--service-account is for --image")
    if is_node(target, workdir, node_flag):
        _node(ctx, target, zone, project, bucket, paths or [], fix, yes, json_out)
        return
    if fix or yes or paths:
        raise UsageError("--fix, --yes and --path are for a node, not a script")
    from tpuctl.frameworks import runtime_of
    from tpuctl.services.doctor import check
    from tpuctl.services.run.environment import spec_of
    from tpuctl.services.run.request import locate

    acc = _accelerator(accelerator)
    root, rel = locate(target, workdir)
    environment = spec_of(requirements, no_requirements, root)[0]  # what `run` would build
    findings = check(root / rel, root, acc, runtime_of(version, acc), setup, environment)
    if json_out:  # `file` relative to the work folder, as documented
        render.print_json([f.to_json() for f in findings])
    else:
        shown = _as_typed(root, str(workdir) if workdir is not None else target)
        sys.stdout.write(lines([dataclasses.replace(f, file=shown(f.file)) for f in findings]))
        from tpuctl.services.doctor.gate import summary

        render.info(f"{shown(rel)} on a {acc.name}: {summary(findings)}")
    if any(f.severity == "error" for f in findings):
        raise declare.Exit(1)


def _node(
    ctx: declare.Context,
    name: str,
    zone: str | None,
    project: str | None,
    bucket: str | None,
    paths: list[str],
    fix: bool,
    yes: bool,
    json_out: bool,
) -> None:
    from tpuctl.cli.doctor_gate import node_report
    from tpuctl.config import load_config_file
    from tpuctl.models import BUCKET_ATTRIBUTE, Node
    from tpuctl.services import staging
    from tpuctl.services.node_doctor import live

    for path in paths:
        if not path.startswith("gs://") or len(path) <= len("gs://"):
            raise UsageError(f"--path {path!r}: give a gs://BUCKET/PATH")
    app = app_of(ctx)
    target = app.target(project, zone)
    factory = app.factory

    def open_bucket(node: Node):  # noqa: ANN202 - a Bucket, imported lazily
        # --bucket, else the bucket the node's jobs use, else the default; checked as
        # `tpuctl jobs` checks it: the default name, from wherever it comes, must be a
        # bucket of this project (a name a job was given, the node keeps: trusted as such)
        config, project = load_config_file(), target.project
        named = bucket or node.metadata.get(BUCKET_ATTRIBUTE)
        name = staging.bucket_name(named, config, project)
        named_by = staging.bucket_source(bucket, config, project)
        if not bucket and named:
            default = name == staging.default_bucket_name(project)
            named_by = "" if default else f"the node's {BUCKET_ATTRIBUTE} metadata"
        found = factory.bucket(name, project)
        staging.check_owner(found, project, factory.iam().project_number, named_by, render.info)
        return found

    asked: list[str] = []

    def confirm(question: str) -> bool:
        if yes:
            return True
        if app.stdin_isatty and not json_out:
            return render.confirm(question, default=False)
        asked.append(question)
        return False

    render.info(f"examining {name} in {target.zone}...")
    report = live.examine(
        app.backends(),
        factory.ssh(),
        f"{target.parent}/nodes/{name}",
        open_bucket,
        paths,
        fix=fix,
        confirm=confirm,
    )
    if json_out:
        render.print_json(report.to_json())
    else:
        sys.stdout.write(node_report(report))
    for question in asked:
        render.info(f"not done (no terminal to ask; --yes agrees): {question}")
    if report.failed:
        raise declare.Exit(1)


def _as_typed(root: Path, typed: str) -> Callable[[str], str]:
    """A file of the work folder `root`, named as the user names their own path (the
    script's, or --workdir's): absolute when they typed it so, else from the current
    folder, so that `proj/train.py:12:` opens in an editor from where they are."""

    def shown(rel: str) -> str:
        path = root / rel
        return str(path) if os.path.isabs(typed) else os.path.relpath(path)

    return shown
