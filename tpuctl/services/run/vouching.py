"""What a job's agents may trust of what other jobs left in the bucket: the environments
this client vouched for (tpuctl/agent/signing.py, docs/environments.md).

A job's agents hold a key of that job alone (signing.job_key), so the index of an
environment a job built is trusted, by itself, only by that job. After an attached run
the client reads the index its job built (`tpuctl/envs/<key>/built/<job>.json`), checks
on the laptop that it is signed with that job's key, names that job, holds the job's own
requirement lines and index settings, and sits under the key they make
(envkeys.env_key), and adds it to the record of that requirement set:

    tpuctl/vouched/<sha256 of {"signer", "requirements"}>.json
        {"version": 1, "for": that sha256, "envs": {ENV KEY: {"index": SHA256 of the
         index's canonical JSON, "job": ID, "at": UNIX SECONDS}, ...}, "signature": ...}

signed with a key derived from the client's that never leaves the laptop. Before each
start, the client reads that one record, checks its signature and sends the map to the
agents over SSH (`trust`). So a job can only ever vouch for an environment of its own
requirement set, built from its own index settings. A detached run is not vouched for
(its client is gone when it ends): the next attached run of its requirements builds
the environment once more, and vouches for its own build.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time
from typing import TYPE_CHECKING, Any

from tpuctl.agent import envkeys, signing
from tpuctl.agent.protocol import canonical
from tpuctl.errors import NotFoundError, PreconditionFailedError, TpuctlError
from tpuctl.services.run import signing as client_signing

if TYPE_CHECKING:
    from tpuctl.cloud.storage import Bucket
    from tpuctl.services.run.spec import Job

RECORDS = "tpuctl/vouched/"
VERSION = 1
KEEP = 16  # environment keys a record keeps, the newest (one a VM image and runtime)
LIMIT = 1 << 20  # bytes: a record bigger than this is not read
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def record_path(signer: str, lines: list[str]) -> str:
    return f"{RECORDS}{_record_for(signer, lines)}.json"


def _record_for(signer: str, lines: list[str]) -> str:
    return signing.digest({"signer": signer, "requirements": sorted(lines)})


def _record_key(client_key: str) -> str:
    """The key the laptop signs its records with (never a job's, never on a VM)."""
    return hmac.new(client_key.encode(), b"tpuctl-vouched", hashlib.sha256).hexdigest()


def indexes_digest(client_key: str, env: dict[str, str]) -> str:
    """The keyed digest of the job's index settings (envkeys.INDEX_SETTINGS): part of the
    environment key, and no URL nor token can be learned from it."""
    settings = {name: env[name] for name in envkeys.INDEX_SETTINGS if name in env}
    message = b"tpuctl-indexes\0" + canonical(settings)
    return hmac.new(client_key.encode(), message, hashlib.sha256).hexdigest()[:32]


def lines_of(job: Job) -> list[str]:
    """The job's requirement lines (none without an environment)."""
    environment = job.spec.environment
    if not environment:
        return []
    return envkeys.requirement_lines(str(environment.get("requirements") or ""))


def trust(job: Job) -> str:
    """What the agents of `job` get for its trust over SSH (signing.Trust), as JSON text:
    its key, the client key's public name, its index settings' digest, and what this
    client vouched for of its requirement set."""
    assert job.bucket is not None
    key = client_signing.key()
    signer = signing.signer(key)
    value = {
        "job_key": client_signing.job_key(job.job_id, key),
        "signer": signer,
        "indexes": indexes_digest(key, job.spec.env),
        "vouched": vouched(job.bucket, key, lines_of(job), job.ui.info),
    }
    return json.dumps(value)


def vouched(bucket: Bucket, client_key: str, lines: list[str], say: Any) -> dict[str, Any]:
    """The environments this client vouched for of requirement set `lines`: {env key:
    {"index": sha256, "job": id}}; {} when none (an invalid record is said, ignored)."""
    if not lines:
        return {}
    path = record_path(signing.signer(client_key), lines)
    try:
        value, generation = _read(bucket, path)
    except TpuctlError as e:
        say(f"warning: environments: could not read gs://{bucket.name}/{path}: {e}")
        return {}
    if value is None and not generation:
        return {}
    if not _valid(value, client_key, path):
        say(
            f"environments: gs://{bucket.name}/{path} is not signed with this client's key "
            "(another writer of the bucket made it): ignored, the environment is built again"
        )
        return {}
    return {k: {"index": e["index"], "job": e["job"]} for k, e in value["envs"].items()}


def vouch(job: Job, statuses: dict[int, dict[str, Any]]) -> None:
    """After an attached run: vouch for the environment this job built, once it checks
    out on the laptop (the module docstring); a failure is said, never the run's."""
    assert job.bucket is not None
    lines = lines_of(job)
    keys = {
        str((s.get("environment") or {}).get("key") or "")
        for s in statuses.values()
        if isinstance(s.get("environment"), dict)
    }
    for env_key in sorted(k for k in keys if _HEX64.match(k)):
        try:
            _vouch(job, lines, env_key)
        except TpuctlError as e:
            job.ui.info(f"warning: environment {env_key[:12]}: could not vouch for it: {e}")


def _vouch(job: Job, lines: list[str], env_key: str) -> None:
    assert job.bucket is not None
    key = client_signing.key()
    index, generation = _read(job.bucket, envkeys.built_path(env_key, job.job_id))
    if not generation:  # the job built nothing: it used an environment vouched for before
        return
    if not checks_out(index, key, job.job_id, lines, job.spec.env, env_key):
        job.ui.info(
            f"environment {env_key[:12]}: the index job {job.job_id} built is not signed "
            "with its key, or not of its own requirements: not vouched for (the next job "
            "builds it again)"
        )
        return
    entry = {"index": signing.digest(index), "job": job.job_id, "at": round(time.time(), 3)}
    path = record_path(signing.signer(key), lines)
    for _ in range(10):
        value, generation = _read(job.bucket, path)
        envs = dict(value["envs"]) if _valid(value, key, path) else {}
        envs[env_key] = entry
        newest = sorted(envs.items(), key=lambda kv: -float(kv[1].get("at") or 0))[:KEEP]
        record = {"version": VERSION, "for": _record_for(signing.signer(key), lines)}
        record["envs"] = dict(newest)
        try:
            job.bucket.write_json(
                path, signing.sign(record, _record_key(key)), if_generation_match=generation
            )
            return
        except PreconditionFailedError:  # another run vouched meanwhile: read it again
            continue


def checks_out(
    index: Any, client_key: str, job_id: str, lines: list[str], env: dict[str, str], env_key: str
) -> bool:
    """Is `index` one that job `job_id` built for its own requirement set and index
    settings, under the key they make, signed with its key?"""
    if not envkeys.valid_index(index, env_key):
        return False
    facts, requirements = index.get("facts"), index.get("requirements")
    return (
        signing.signed(index, signing.job_key(client_key, job_id))
        and index.get("job") == job_id
        and isinstance(requirements, list)
        and sorted(str(r) for r in requirements) == sorted(lines)
        and isinstance(facts, dict)
        and facts.get("indexes") == indexes_digest(client_key, env)
        and envkeys.env_key(lines, facts, signing.signer(client_key)) == env_key
    )


def _read(bucket: Bucket, path: str) -> tuple[Any, int]:
    """An object's JSON value and generation; (None, 0) when absent; a value that is not
    JSON is None with its generation (it is then replaced)."""
    try:
        data, generation = bucket.read_bytes(path, LIMIT)
    except NotFoundError:
        return None, 0
    try:
        return json.loads(data), generation
    except ValueError:
        return None, generation


def _valid(value: Any, client_key: str, path: str) -> bool:
    if not signing.signed(value, _record_key(client_key)) or value.get("version") != VERSION:
        return False
    if f"{RECORDS}{value.get('for')}.json" != path or not isinstance(value.get("envs"), dict):
        return False
    return all(
        _HEX64.match(str(k))
        and isinstance(e, dict)
        and _HEX64.match(str(e.get("index")))
        and isinstance(e.get("job"), str)
        for k, e in value["envs"].items()
    )
