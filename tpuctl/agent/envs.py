"""A job's Python environment on this worker (`Environments.prepare`): built once per key
for every worker, every run and every recovery, cached in the bucket, installed from it.

- A venv per key on the VM (`~/.tpuctl/envs/<key>/venv`), ready once its marker
  (`ready.json`) is written last: a worker that has it reuses it with no install at all.
- Else the bucket: `tpuctl/envs/<key>/index.json` names every wheel with its sha256, and
  is signed with the client's signing key (signing.py), which the key of the entry also
  depends on: an index without a valid signature (written by anyone but an agent of this
  client: another job VM can write the bucket) is never used, said in one line, and the
  entry rebuilt. The wheels are fetched in parallel (streams.py, ranged and streamed to
  disk), each checked against its sha256, then unpacked into a new venv (wheels.py: no
  pip, no process) and removed: no request to any package index. A wheel that is
  missing or does not match makes the entry corrupt: its index is deleted (only the
  generation read) and the entry rebuilt.
- No index: one worker builds (envbuild.py). It is the one whose write of `lock.json` with
  ifGenerationMatch=0 succeeds and who then still finds no index (or worker 0 with
  --rebuild-env, which overwrites the lock); it runs `python3 -m pip wheel -r` for this
  VM's Python (the user's PIP_INDEX_URL, PIP_EXTRA_INDEX_URL... come from the job's env
  values, never from the bucket), uploads the wheels content-addressed, writes the index
  LAST, then deletes the lock. While it builds it rewrites the lock every LOCK_REFRESH
  seconds; the others wait for the index, and take the lock over from a builder whose
  lock has not changed for LOCK_STALE seconds (seen on their own clock). A builder that
  fails writes the failure into the lock: the workers of the same attempt fail with it,
  a later job tries again.

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
        signing_key=getattr(job.args, "signing_key", ""),
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
        signing_key: str = "",
        hidden: list[str] | None = None,
    ) -> None:
        self.storage, self.root, self.job, self.attempt = storage, root, job, attempt
        self.worker, self.runtime, self.say, self.log = worker, runtime, say, log
        self.python, self.signing_key, self.hidden = python, signing_key, hidden or []
        self.phases: dict[str, float] = {}
        self.outcome: Json = {}

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
                "environment: the agent was given no signing key, so no environment of "
                "the bucket can be trusted: start the job with this version of tpuctl"
            )
        system = bool(spec.get("system_site_packages"))
        facts = envkeys.vm_facts(self.runtime, system)
        key = envkeys.env_key(lines, facts, signing.signer(self.signing_key))
        here = self.root / "envs" / key
        venv, marker = here / "venv", here / "ready.json"
        rebuild = bool(spec.get("rebuild")) and self.attempt == 1
        self.outcome = {"key": key, "worker": self.worker}
        for wrong in MISSET:
            self.say(f"environment: {wrong}")
        started, cpu = time.monotonic(), cpu_seconds()
        if not rebuild and marker.is_file() and (venv / "bin" / "python").exists():
            done = json.loads(marker.read_text())
            self.outcome.update(
                how="reused",
                packages=done.get("packages", []),
                bytes=0,
                seconds=round(time.monotonic() - started, 3),
                cpu=round(cpu_seconds() - cpu, 3),
            )
            self.say(
                f"environment {key[:12]}: reused the venv on this VM "
                f"({len(done.get('packages', []))} packages), nothing installed"
            )
            os.utime(str(marker))  # its last use, for prune()
            self.used(key)
            self.prune(key)
            return venv
        wheels = here / "wheels"
        if marker.exists():  # (a rebuild) the venv is not whole again until it is rewritten
            marker.unlink()
        index = self.obtain(Wanted(key, lines, facts, wheels, env), rebuild)
        t = time.monotonic()
        packages = self.install(venv, wheels, index, system)
        self.phases["install"] = time.monotonic() - t
        marker.write_text(json.dumps({"packages": packages, "index": index.get("built")}))
        shutil.rmtree(str(wheels), ignore_errors=True)  # in the venv and the bucket now
        self.outcome.update(
            packages=packages, phases={k: round(v, 3) for k, v in self.phases.items()}
        )
        self.outcome["seconds"] = round(time.monotonic() - started, 3)
        self.outcome["cpu"] = round(cpu_seconds() - cpu, 3)
        phases = ", ".join(f"{k} {v:.1f}s" for k, v in self.phases.items())
        built = self.outcome["how"] == "built"
        what, moved = ("built here", "uploaded") if built else ("from the bucket", "fetched")
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
            index, generation = self.storage.read_json(envkeys.index_path(key))
            if index is not None and (not rebuild or index.get("job") == self.job):
                if not signing.signed(index, self.signing_key):
                    self.say(
                        f"environment {key[:12]}: the cached index is not signed with "
                        "this client's key (another writer of the bucket made it): "
                        "nothing of it is installed; rebuilding it"
                    )
                elif envkeys.valid_index(index, key) and self.fetch(key, index, want.wheels):
                    return index
                else:
                    self.say(
                        f"environment {key[:12]}: the cached entry is corrupt (a wheel "
                        "is missing or does not match its sha256): rebuilding it"
                    )
                self.storage.delete(envkeys.index_path(key), if_generation_match=generation)
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
            if self.storage.read_json(envkeys.index_path(key))[0] is not None:
                self.storage.delete(envkeys.lock_path(key), if_generation_match=taken)
                continue
            return self.build(want)

    def fetch(self, key: str, index: Json, wheels: Path) -> bool:
        """Every wheel of the index into `wheels`, checked; False when one is missing or
        does not match (the entry is corrupt)."""
        t = time.monotonic()
        wheels.mkdir(parents=True, exist_ok=True)
        wanted = {w["file"]: w for w in index["wheels"]}
        for old in wheels.iterdir():
            if old.name not in wanted or sha256_of(old) != wanted[old.name]["sha256"]:
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
        self.outcome.update(how="cached", bytes=fetched, wheels=len(wanted))
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
