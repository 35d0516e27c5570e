"""A job's Python environment on this worker (`Environments.prepare`): built once per key
for every worker, every run and every recovery, cached in the bucket, installed from it.

- The wheels of each key stay on the VM (`~/.tpuctl/envs/<key>/wheels`), and every job
  makes its venv (`~/.tpuctl/envs/<key>/venv`) afresh from them: what a job wrote in a
  venv (a `.pth`, a `sitecustomize`, a changed module) never reaches the next job of
  the VM. Each kept wheel is checked against its sha256 in a trusted index first; one
  that is missing or changed is fetched again.
- The bucket: `tpuctl/envs/<key>/index.json` names every wheel with its sha256. It is
  used only when it is trusted (signing.py): built by this very job (its `job` is this
  job and it carries a valid signature of the job's key: another worker of the job
  built it, or an earlier attempt), or vouched for by the client (the sha256 of its
  canonical JSON is the one the client sent for this key). A job's own build is also
  kept as `built/<job>.json`, for the job's later attempts and for the client to vouch
  for; a vouched build is read there when `index.json` is another's. An index that is
  neither is never used, said in one line, and the entry built again. The wheels are
  fetched in parallel (streams.py, ranged and streamed to disk), each checked against
  its sha256, then unpacked into a new venv (wheels.py: no pip, no process): no request
  to any package index. A wheel that is missing or does not match makes the entry
  corrupt: its index is deleted (only the generation read) and the entry rebuilt.
- No trusted index: one worker builds (envbuild.py). It is the one whose write of
  `lock.json` with ifGenerationMatch=0 succeeds and who then still finds no trusted
  index (or worker 0 with --rebuild-env, which overwrites the lock); it runs `python3 -m
  pip wheel -r` for this VM's Python (the user's PIP_INDEX_URL, PIP_EXTRA_INDEX_URL...
  come from the job's env values, never from the bucket), uploads the wheels
  content-addressed, writes its index (signed with the job's key) LAST, then deletes the
  lock. While it builds it rewrites the lock every LOCK_REFRESH seconds; the others wait
  for the index, and take the lock over from a builder whose lock has not changed for
  LOCK_STALE seconds (seen on their own clock). A builder that fails writes the failure
  into the lock: the workers of the same attempt fail with it, a later job tries again.

Standard library only, Python 3.8+.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any, Callable

from . import envkeys, signing
from . import wheels as installer
from .envbuild import Builder, EnvFailed, Wanted, package_of, sha256_of
from .net import HttpError, Json, Mismatch
from .protocol import size
from .storage import Storage
from .streams import Transfers

# What the VM's environment set wrong, said in every job's log (never a crash at import).
MISSET: list[str] = []


def _setting(name: str, default: float, unit: str) -> float:
    """A positive number from the VM's environment, else `default` (and MISSET says so)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        MISSET.append(f"{name}={raw!r} is not a positive number of {unit}: {default:g} used")
        return default
    return value


# A lock unchanged this long: its builder is gone (TPUCTL_ENV_LOCK_STALE: seconds, for
# images where a build may stall longer between its lock's rewrites).
LOCK_STALE = _setting("TPUCTL_ENV_LOCK_STALE", 120.0, "seconds")
# Seconds between looks at the index while another worker builds: from POLL, growing to
# POLL_MAX (64 workers waiting on a long build ask the bucket about 30 times a second).
POLL, POLL_MAX = 0.5, 4.0
# A venv of the VM that no job used for this many days is removed by the next job there.
KEEP_DAYS = _setting("TPUCTL_ENV_KEEP_DAYS", 14.0, "days")


def for_job(job: Any, spec: Json, env: dict[str, str]) -> tuple[dict[str, str], str]:
    """The environment of a job's request on this worker (job.Job: its storage, root,
    worker, log): the script's env with the venv active, and the venv's python. Its
    outcome goes into the worker's status (`environment`)."""
    made = Environments(
        job.storage,
        job.dir.parent.parent,
        job.args.job_id,
        job.args.attempt,
        job.worker,
        job.me.get("runtime", ""),
        job.say,
        job.local_log,
        trust=getattr(job.args, "trust", signing.Trust()),
        hidden=sorted(job.user_env.values()),
    )
    try:
        venv = made.prepare(spec, env)
    finally:
        if made.outcome:
            job.status.value["environment"] = made.outcome
    return activated(env, venv), str(venv / "bin" / "python")


class Environments(Builder):
    """This worker's environments: `prepare(spec, env)` the one a job asks for."""

    def __init__(
        self,
        storage: Storage,
        root: Path,
        job: str,
        attempt: int,
        worker: int,
        runtime: str,
        say: Callable[[str], None],
        log: Path,
        python: str = sys.executable,
        trust: signing.Trust | None = None,
        hidden: list[str] | None = None,
    ) -> None:
        self.storage, self.root, self.job, self.attempt = storage, root, job, attempt
        self.worker, self.runtime, self.say, self.log = worker, runtime, say, log
        self.python, self.hidden = python, hidden or []
        self.trust = trust or signing.Trust()
        self.signing_key = self.trust.job_key
        self.phases: dict[str, float] = {}
        self.outcome: Json = {}
        self.distrusted = False  # an index neither this job's nor vouched for: said once

    # -- the job's view ------------------------------------------------------------------
    def prepare(self, spec: Json, env: dict[str, str]) -> Path:
        """The venv's folder for `spec` (the request's `environment`), made if need be.
        `env`: the job's environment (the user's index settings among it)."""
        try:
            lines = envkeys.requirement_lines(str(spec.get("requirements") or ""))
        except envkeys.BadRequirements as e:
            raise EnvFailed(f"environment: {spec.get('source')}: {e}") from None
        if not self.signing_key:
            raise EnvFailed(
                "environment: the agent was given no job key, so no environment of the "
                "bucket can be trusted: start the job with this version of tpuctl"
            )
        system = bool(spec.get("system_site_packages"))
        facts = dict(envkeys.vm_facts(self.runtime, system), indexes=self.trust.indexes)
        key = envkeys.env_key(lines, facts, self.trust.signer)
        here = self.root / "envs" / key
        for mine in (here, here / "venv", here / "wheels"):  # a job may have left a link
            if mine.is_symlink():
                mine.unlink()
        venv, marker = here / "venv", here / "ready.json"
        rebuild = bool(spec.get("rebuild")) and self.attempt == 1
        self.outcome = {"key": key, "worker": self.worker}
        for wrong in MISSET:
            self.say(f"environment: {wrong}")
        started, cpu = time.monotonic(), cpu_seconds()
        wheels = here / "wheels"
        index = self.obtain(Wanted(key, lines, facts, wheels, env), rebuild)
        t = time.monotonic()
        packages = self.install(venv, wheels, index, system)
        self.phases["install"] = time.monotonic() - t
        # the last use of the key's wheels on this VM (prune); never read back
        marker.write_text(json.dumps({"packages": packages, "index": index.get("built")}))
        self.outcome.update(
            packages=packages, phases={k: round(v, 3) for k, v in self.phases.items()}
        )
        self.outcome["seconds"] = round(time.monotonic() - started, 3)
        self.outcome["cpu"] = round(cpu_seconds() - cpu, 3)
        phases = ", ".join(f"{k} {v:.1f}s" for k, v in self.phases.items())
        what, moved = {
            "built": ("built here", "uploaded"),
            "reused": ("the wheels kept on this VM, checked, in a new venv", "fetched"),
        }.get(self.outcome["how"], ("from the bucket", "fetched"))
        self.say(
            f"environment {key[:12]}: {what}: {len(packages)} packages "
            f"({', '.join(packages[:8])}{', ...' if len(packages) > 8 else ''}), "
            f"{size(self.outcome.get('bytes', 0))} {moved}; {phases}"
        )
        self.used(key)
        self.prune(key)
        return venv

    def prune(self, key: str) -> None:
        """The venvs of this VM no job used for KEEP_DAYS (a reused node gathers one per
        key, each the size of its wheels unpacked) removed, the job's own kept; said."""
        cutoff = time.time() - KEEP_DAYS * 86400
        for other in sorted((self.root / "envs").iterdir()):
            if other.name == key or not other.is_dir():
                continue
            marker = other / "ready.json"
            try:  # one never finished: by its folder's last change
                last = (marker if marker.exists() else other).stat().st_mtime
            except OSError:
                continue
            if last < cutoff:
                shutil.rmtree(str(other), ignore_errors=True)
                self.say(
                    f"environment {other.name[:12]}: removed its venv from this VM "
                    f"(no job used it for {KEEP_DAYS:g} days)"
                )

    def used(self, key: str) -> None:
        """Worker 0 says the environment was used (`gc --envs-unused` goes by it); a
        failure to say so never fails the job."""
        if self.worker != 0:
            return
        try:
            self.storage.write_json(envkeys.used_path(key), {"job": self.job, "at": time.time()})
        except HttpError as e:
            self.say(f"environment {key[:12]}: could not record its use: {e}")

    # -- the bucket's entry --------------------------------------------------------------
    def obtain(self, want: Wanted, rebuild: bool) -> Json:
        """The index of `want.key`, its wheels in `want.wheels`: fetched, or built here."""
        key = want.key
        if rebuild and self.worker == 0:
            self.say(f"environment {key[:12]}: --rebuild-env: building it again")
            self.storage.write_json(envkeys.lock_path(key), self.lock_value())  # taken as is
            return self.build(want)
        seen: tuple | None = None  # (lock generation, when first seen)
        waited, poll = False, POLL
        while True:
            found = self.trusted_index(key, rebuild)
            if found is not None:
                index, name, generation = found
                if self.fetch(key, index, want.wheels):
                    return index
                self.say(
                    f"environment {key[:12]}: the cached entry is corrupt (a wheel "
                    "is missing or does not match its sha256): rebuilding it"
                )
                self.storage.delete(name, if_generation_match=generation)
                continue
            lock, lock_gen = self.storage.read_json(envkeys.lock_path(key))
            if lock and lock.get("error"):
                if (lock.get("job"), lock.get("attempt")) == (self.job, self.attempt):
                    raise EnvFailed(str(lock["error"]), here=False)
                # an earlier job's failure: this job tries again
                self.storage.delete(envkeys.lock_path(key), if_generation_match=lock_gen)
                continue
            if rebuild or lock is not None:  # another worker builds: wait for its index
                if not waited:
                    waited = True
                    self.say(
                        f"environment {key[:12]}: worker {(lock or {}).get('worker', 0)} "
                        "builds it; waiting for its index"
                    )
                now = time.monotonic()
                if seen is None or seen[0] != lock_gen:
                    seen = (lock_gen, now)
                elif lock is not None and now - seen[1] > LOCK_STALE:
                    self.say(
                        f"environment {key[:12]}: its builder's lock has not changed "
                        f"for {LOCK_STALE:g}s: taking over"
                    )
                    self.storage.delete(envkeys.lock_path(key), if_generation_match=lock_gen)
                time.sleep(poll)
                poll = min(poll * 1.5, POLL_MAX)
                continue
            try:
                taken = self.storage.write_json(envkeys.lock_path(key), self.lock_value(), 0)
            except HttpError as e:
                if e.status == 412:  # another worker took it first
                    continue
                raise
            # A builder may have written its index and let its lock go between the two
            # reads above: then the entry is whole, and there is nothing to build.
            if self.trusted_index(key, rebuild) is not None:
                self.storage.delete(envkeys.lock_path(key), if_generation_match=taken)
                continue
            return self.build(want)

    def trusted_index(self, key: str, rebuild: bool) -> tuple[Json, str, int] | None:
        """A trusted index of `key` in the bucket (the module docstring), with its name
        and generation: `index.json`, else the vouched build, else this job's own build
        (another job's index may have replaced it in `index.json`). With --rebuild-env,
        only this job's."""
        vouched = {} if rebuild else self.trust.vouched.get(key, {})
        names = [envkeys.index_path(key)]
        names += [envkeys.built_path(key, vouched["job"])] if vouched else []
        names += [envkeys.built_path(key, self.job)]
        other = False
        for name in names:
            index, generation = self.storage.read_json(name)
            if index is None:
                if name == names[0] and not vouched:
                    return None  # no entry (a job's own build writes index.json too)
                continue
            mine = index.get("job") == self.job and signing.signed(index, self.signing_key)
            if envkeys.valid_index(index, key) and (
                mine or (vouched and signing.digest(index) == vouched["index"])
            ):
                return index, name, generation
            other = other or not rebuild
        if other and not self.distrusted:
            self.distrusted = True
            self.say(
                f"environment {key[:12]}: the cached index is not vouched for by this "
                "client (nor built by this job): nothing of it is installed; rebuilding it"
            )
        return None

    def fetch(self, key: str, index: Json, wheels: Path) -> bool:
        """Every wheel of the index into `wheels`, checked; False when one is missing or
        does not match (the entry is corrupt)."""
        t = time.monotonic()
        wheels.mkdir(parents=True, exist_ok=True)
        wanted = {w["file"]: w for w in index["wheels"]}
        for old in wheels.iterdir():  # what a job left there: only the index's wheels stay
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(str(old))
            elif (
                old.is_symlink()
                or not old.is_file()
                or old.name not in wanted
                or sha256_of(old) != wanted[old.name]["sha256"]
            ):
                old.unlink()
        fetched = 0
        try:
            with Transfers(self.storage) as transfers:
                for name, wheel in sorted(wanted.items()):
                    target = wheels / name
                    if not target.exists():
                        fetched += int(wheel.get("size") or 0)
                        object_name = envkeys.wheel_path(key, wheel["sha256"], name)
                        transfers.download(object_name, target, wheel["sha256"])
        except HttpError as e:  # Mismatch included
            if isinstance(e, Mismatch) or e.status == 404:
                return False
            raise
        self.phases["fetch"] = time.monotonic() - t
        how = "cached" if fetched else "reused"  # reused: every wheel was on this VM
        self.outcome.update(how=how, bytes=fetched, wheels=len(wanted))
        return True

    # -- the venv ------------------------------------------------------------------------
    def install(self, venv: Path, wheels: Path, index: Json, system: bool) -> list[str]:
        """A fresh venv at `venv` with exactly the index's wheels, from `wheels` only
        (wheels.py: unpacked as the wheel format says, no pip, no index)."""
        if venv.exists():
            shutil.rmtree(str(venv))
        try:
            installer.create(venv, self.python, system)
            installer.install(venv, [wheels / w["file"] for w in index["wheels"]])
        except (
            OSError,
            subprocess.CalledProcessError,
            installer.BadWheel,
            zipfile.BadZipFile,
        ) as e:
            shutil.rmtree(str(venv), ignore_errors=True)
            detail = getattr(e, "stderr", None)
            said = detail.decode(errors="replace").strip().splitlines()[-1:] if detail else []
            raise EnvFailed(f"environment: the install failed: {said[0] if said else e}") from None
        return sorted(package_of(w["file"]) for w in index["wheels"])


def cpu_seconds() -> float:
    """The CPU this agent and the processes it waited for have used (user and system):
    what an environment step costs apart from its waits, on a machine of its own."""
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def activated(env: dict[str, str], venv: Path) -> dict[str, str]:
    """The job's environment with the venv first on PATH, as `activate` would make it."""
    bin_dir = str(venv / "bin")
    return dict(env, VIRTUAL_ENV=str(venv), PATH=bin_dir + os.pathsep + env.get("PATH", ""))
