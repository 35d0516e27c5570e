"""`check`: every static check over a script and the work dir's modules it imports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tpuctl.catalog import SliceShape
from tpuctl.services.doctor import common, jax_checks, runtime, tf_data, tf_setup, torch_xla_checks
from tpuctl.services.doctor.context import Context
from tpuctl.services.doctor.findings import Finding
from tpuctl.services.doctor.program import Program

FAMILIES = (tf_setup, tf_data, jax_checks, torch_xla_checks, common)


def check(
    script: Path,
    workdir: Path,
    accelerator: SliceShape | None,
    runtime_version: str | None = None,
    setup: str | None = None,
    environment: dict[str, Any] | None = None,
) -> list[Finding]:
    """The findings for `script` (a file inside `workdir`), for a slice of `accelerator`
    (None: the checks that depend on it are left out), in file and line order. With a
    `runtime_version`, also the frameworks it imports against that image, what the job's
    `environment` lists (the request's requirement set: services/run/environment.py) and
    what `setup` installs (runtime.py; None: not checked, e.g. a job on an existing node).

    Raises NotPythonError (a UsageError) when the script is not Python.
    """
    program = Program(script.resolve(), workdir.resolve())
    ctx = Context(program, accelerator)
    found: set[Finding] = set()
    for family in FAMILIES:
        found.update(family.check(ctx))
    if runtime_version is not None:
        found.update(runtime.check(program, accelerator, runtime_version, setup, environment))
    return sorted(found, key=Finding.sort_key)
