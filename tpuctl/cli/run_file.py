"""`tpuctl run -f FILE` and `--print-spec`: a job file's values under the flags the user
gave, and the job file for what was given."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tpuctl.cli import declare

if TYPE_CHECKING:
    from tpuctl.services.run.jobfile import JobFile
    from tpuctl.services.run.request import RunRequest

_GIVEN = ("COMMANDLINE", "ENVIRONMENT", "PROMPT")  # click's ParameterSource names


def given_flag(ctx: declare.Context, param: str) -> bool:
    """Whether the user gave this parameter (not its default), as click knows it."""
    source = ctx.get_parameter_source(param)
    return source is not None and source.name in _GIVEN


def merged(
    ctx: declare.Context, file: Path | None
) -> tuple[dict[str, Any], JobFile | None, set[str]]:
    """run()'s parameters with a job file's values under the flags the user gave; the
    file, and the keys it gave."""
    from tpuctl.services.run import jobfile

    params = dict(ctx.params)
    if file is None:
        return params, None, set()
    job_file = jobfile.load(file)
    used = jobfile.merge(params, {n for n in params if given_flag(ctx, n)}, job_file)
    return params, job_file, used


def write_spec(
    ctx: declare.Context,
    request: RunRequest,
    from_file: set[str],
    script: Path | str | None,
    restarts: int,
) -> None:
    """The job file for what was given (flags, and the file read with -f) on stdout."""
    from tpuctl.services.run import jobfile

    values = vars(request)
    given = {n for n in values if given_flag(ctx, n)}
    text = jobfile.spec_text(values, given, from_file, script, restarts)
    sys.stdout.buffer.write(text.encode("utf-8"))
    sys.stdout.buffer.flush()
