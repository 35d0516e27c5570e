"""What an attempt runs once its code is fetched (`run`): the Python environment, the
setup and the script under supervision (Job.supervise); or, for `tpuctl run --image`,
the image pulled by its digest and the command run in it with Docker (container.py),
supervised as a script is (its log, a cancel's SIGTERM passed on by Docker's
sig-proxy, the preemption notice, its exit status) and removed whatever happened.

Standard library only, Python 3.8+.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from . import container, envs, tpu_health
from .net import Json


def run(job: Any, request: Json, env: dict) -> int:
    """The attempt's exit status (0 when cancelled before anything started); raises
    envs.EnvFailed or container.PullFailed when nothing of the job could run."""
    if request.get("image"):
        return in_container(job, request, env, request["image"])
    script = request["script"]
    command = [sys.executable, script] if script.endswith(".py") else [f"./{script}"]
    code = 0
    if request.get("environment") and job.may_start("environment"):
        env, job.python = envs.for_job(job, request["environment"], env)
        command[0] = job.python if script.endswith(".py") else command[0]
    if request.get("setup") and job.may_start("setup"):
        job.say(f"setup: {request['setup']}")
        shell = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
        code = job.supervise([shell, "-c", request["setup"]], env, "setup")
        if code:
            job.say(f"the setup failed with exit status {code}")
    if code == 0 and job.may_start("script"):
        code = tpu_health.script(job, command + list(request.get("args") or []), env)
    return code


def in_container(job: Any, request: Json, env: dict, image: dict) -> int:
    """Pull `image` (the "pull" phase) with the VM's token, then run in it the staged
    script (its folder mounted and the working directory), or the request's command
    (`args`; none: the image's ENTRYPOINT/CMD)."""
    script, args = request.get("script"), list(request.get("args") or [])
    code_dir = job.code if script else None
    if script:
        args = (["python3", script] if script.endswith(".py") else [f"./{script}"]) + args
    if not job.may_start("pull"):
        return 0
    token = job.storage.token.headers()["Authorization"].split(" ", 1)[1]
    container.pull(image, token, job.dir / "docker", job.say)
    if not job.may_start("script"):
        return 0
    name = container.name(job.args.job_id, job.worker)
    container.remove(name)  # an earlier attempt's, left by an agent killed outright
    argv = container.command(
        image, name, env, list(request.get("env") or []), job.outputs, code_dir, args, job.dir
    )
    try:
        return tpu_health.script(job, argv, env)
    finally:
        container.remove(name)
