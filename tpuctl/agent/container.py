"""A job that runs in a container image (`tpuctl run --image`): the worker logs in to
Artifact Registry with the VM's own token, pulls the image by its digest, and runs the
command in it with Docker, as Google documents running a TPU workload in a container
(cloud.google.com/tpu/docs/run-in-container: `docker run --net=host --privileged`).

The request's `"image"` is what the client resolved on the laptop:
`{"name": "us-docker.pkg.dev/P/R/I@sha256:HEX", "registry": "us-docker.pkg.dev"}`, and
`"pythonpath"` when the image's config sets PYTHONPATH (its Env).
Every worker runs that digest, never a tag: a tag moved after the client resolved it
changes nothing that runs.

- `pull`: `docker login -u oauth2accesstoken --password-stdin https://REGISTRY` with the
  VM's service-account token (cloud.google.com/artifact-registry/docs/docker/
  authentication#token), into a Docker config in the job's own 0o700 folder that is
  removed once the pull is done (the token is not left on the disk), then `docker pull`.
  A refused login or pull is `PullFailed` with Docker's own line (the registry names
  the missing permission).
- `command`: the `docker run` argv. `--rm`, a name per job and worker (`name`),
  host network and `--privileged` (the TPU's device files, as the guide has it),
  `--shm-size` as Hugging Face's TPU guide sets it (a data loader's shared memory),
  the job's folders mounted at the same paths (TPUCTL_OUTPUT_DIR means the same inside;
  the staged code only when the command names a file of it), and the job's variables
  passed by name (`-e NAME`): their values never appear on a command line.
  `tpuctl stacks` and `tpuctl profile` work for a Python in the image as for a script
  (sitehook.py): the job's site, stacks and profile folders are mounted at the same
  paths, PYTHONPATH is the site folder, then the image's own; and `--pid=host`, so
  that a process's pid, which names its stacks file, is the VM's, where stacks.py
  finds the process that holds the file (/proc/PID/fd) and signals it (in a PID
  namespace of its own the container's first process would be pid 1 for itself).
  Docker's CLI passes the signals it gets to the container's process (its
  `--sig-proxy`, on by default for an attached run), so a cancel, a Ctrl-C or a
  preemption notice reaches the job as for a script.
- `remove`: `docker rm -f NAME`, after the run whatever happened (a CLI killed with
  SIGKILL leaves its container running).

Standard library only, Python 3.8+.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from . import sitehook

DOCKER = "docker"
SOCKET = "/var/run/docker.sock"  # Docker's own: root's, and its group's
USER = "oauth2accesstoken"  # Artifact Registry's user name for an access token
SHM_SIZE = "16g"  # huggingface.co/docs/optimum-tpu/howto/installation_inside_a_container
PULL_TIMEOUT = 3600.0  # seconds: a large image on a slow day, not forever
# the job's variables a container gets (by name): tpuctl's, the slice's, JAX's and
# libtpu's, and those the user gave (`--env`); not the VM's own PATH, HOME, ...
PREFIXES = ("TPUCTL_", "MEGASCALE_", "TPU_", "JAX_", "XLA_", "LIBTPU_")


class PullFailed(Exception):
    """The image could not be pulled: Docker's own words (the registry's refusal)."""


_prefix: list[str] = []  # docker() found once per agent


def docker() -> list[str]:
    """How this worker's agent runs Docker: `docker` as root or where its user may use
    Docker's socket (the docker group); else `sudo -n -E docker` where passwordless sudo
    allows, as TPU VMs give their SSH users (Google's run-in-container guide runs `sudo
    docker run`; -E keeps DOCKER_CONFIG and the job's variables, which `-e NAME` reads);
    else `docker`, whose own error then says why. sudo passes on the signals it gets."""
    if not _prefix:
        _prefix.append(DOCKER)
        if os.geteuid() != 0 and not os.access(SOCKET, os.R_OK | os.W_OK):
            try:
                quiet = subprocess.DEVNULL
                done = subprocess.run(
                    ["sudo", "-n", "true"], stdout=quiet, stderr=quiet, timeout=30
                )
            except (OSError, subprocess.SubprocessError):
                done = None
            if done is not None and done.returncode == 0:
                _prefix[:] = ["sudo", "-n", "-E", DOCKER]
    return list(_prefix)


def name(job_id: str, worker: int) -> str:
    """The container's name: one per job and worker, so a later attempt finds a stale one."""
    return f"tpuctl-{job_id}-w{worker}"


def pull(image: dict[str, str], token: str, config_dir: Path, say: Any) -> None:
    """Log in and pull `image["name"]`; PullFailed with Docker's last line when refused."""
    config_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    env = dict(os.environ, DOCKER_CONFIG=str(config_dir))
    try:
        _docker(
            ["login", "-u", USER, "--password-stdin", "https://" + image["registry"]],
            env,
            token,
            "log in to " + image["registry"],
        )
        say(f"pulling {image['name']}")
        out = _docker(["pull", image["name"]], env, None, "pull " + image["name"])
        for line in out.splitlines():
            if line.startswith("Status:"):
                say(line)
    finally:  # the token is the VM's; Docker keeps the pulled image, not the login
        shutil.rmtree(str(config_dir), ignore_errors=True)


def _docker(args: list[str], env: dict[str, str], stdin: str | None, what: str) -> str:
    try:
        done = subprocess.run(
            [*docker(), *args],
            input=(stdin or "").encode(),
            capture_output=True,
            env=env,
            timeout=PULL_TIMEOUT,
        )
    except FileNotFoundError:
        raise PullFailed(f"could not {what}: docker is not installed on this VM") from None
    except subprocess.TimeoutExpired:
        raise PullFailed(f"could not {what} in {PULL_TIMEOUT:g}s") from None
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise PullFailed(f"could not {what}: {said[-1] if said else done.returncode}")
    return done.stdout.decode("utf-8", "replace")


def passed(env: dict[str, str], user_names: list[str]) -> list[str]:
    """The names of the variables the container gets: the job's and the user's."""
    names = {k for k in env if k.startswith(PREFIXES)} | {n for n in user_names if n in env}
    return sorted(names)


def command(
    image: dict[str, str],
    container: str,
    env: dict[str, str],
    user_names: list[str],
    outputs: Path,
    code: Path | None,
    argv: list[str],
    job_dir: Path,
) -> list[str]:
    """The `docker run` argv for one worker's attempt (`env` is the CLI's environment, from
    which `-e NAME` takes each value; `code`: the staged folder, mounted and the working
    directory, when the command names a file of it; `argv` replaces the image's CMD, none:
    the image's own; `job_dir`: the job's folder, whose site, stacks and profile folders
    sitehook.site_env made)."""
    run = [*docker(), "run", "--rm", "--name", container, "--net=host", "--privileged"]
    run += ["--pid=host", "--shm-size", SHM_SIZE]
    for key in passed(env, user_names):
        run += ["-e", key]
    site = sitehook.folders(job_dir)
    path = [str(site[0]), image.get("pythonpath") or ""]
    run += ["-e", "PYTHONPATH=" + os.pathsep.join(p for p in path if p)]
    for folder in (*site, outputs):
        run += ["-v", f"{folder}:{folder}"]
    if code is not None:
        run += ["-v", f"{code}:{code}", "-w", str(code)]
    return [*run, image["name"], *argv]


def remove(container: str) -> None:
    """The container gone, whatever ended the run (quietly: it usually is already)."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(
            [*docker(), "rm", "-f", container],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=60,
        )
