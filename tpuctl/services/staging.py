"""Stage a job's code in Cloud Storage: content-addressed blobs plus a job record, where
the job protocol (tpuctl/agent/protocol.py, the agent's too) puts them:

    tpuctl/blobs/<sha256>                         one object per distinct file content
    tpuctl/jobs/<job-id>/request.json             what runs: script, args, setup, env names,
                                                  the code manifest (immutable; its digest
                                                  goes to the agents over SSH)
    tpuctl/jobs/<job-id>/job.json                 the job record: who, when, where, what

Files whose content is already in the bucket are not uploaded again, so a second run of
an unchanged work dir writes nothing but its request and record. Environment values
never reach the bucket: the request and the record keep only their names.
"""

from __future__ import annotations

import re
import secrets
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tpuctl.agent.protocol import (
    BLOBS,
    REQUEST_VERSION,
    job_record_path,
    request_digest,
    request_path,
)
from tpuctl.config import for_project, login_name
from tpuctl.errors import (
    AlreadyExistsError,
    ConfigError,
    PreconditionFailedError,
    TpuctlError,
    UsageError,
)
from tpuctl.services.blob_sender import BlobSender
from tpuctl.services.workdir import (
    FileEntry,
    Identity,
    Selection,
    Snapshot,
    select,
)

if TYPE_CHECKING:
    from tpuctl.cloud.storage import Bucket

JOB_RECORD_VERSION = 1
UPLOAD_WORKERS = 8


def new_job_id(now: float | None = None) -> str:
    """Sortable and unique: `20261129-153012-ab12cd` (UTC time, then 24 random bits)."""
    stamp = datetime.fromtimestamp(time.time() if now is None else now, timezone.utc)
    return f"{stamp:%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def default_bucket_name(project: str) -> str:
    """`<project>-tpuctl`; a domain-scoped project (`example.com:p`) made bucket-safe."""
    return re.sub(r"[^a-z0-9_-]", "-", project.lower()) + "-tpuctl"


def bucket_name(flag: str | None, config: Mapping[str, Any], project: str) -> str:
    """The bucket to use: --bucket, else the config file's `bucket`, else the default.
    Accepts `gs://name`, `gs://name/` or `name`."""
    chosen = flag or for_project(config, project).get("bucket") or default_bucket_name(project)
    name = str(chosen).strip()
    name = name.removeprefix("gs://").rstrip("/")
    if not name or "/" in name:
        raise UsageError(
            f"bad bucket {chosen!r}: give a bucket name, e.g. gs://my-bucket",
            hint="tpuctl keeps everything under gs://BUCKET/tpuctl/; sub-folders are not supported",
        )
    rule = bucket_name_rule(name)
    if rule:  # refused here, before anything is created or billed, not by the create
        source = bucket_source(flag, config, project) or "the default bucket name"
        message = f"invalid bucket name gs://{name} (from {source}): {rule}"
        hint = "bucket names: https://cloud.google.com/storage/docs/buckets#naming"
        if source == "--bucket":
            raise UsageError(message.replace(" (from --bucket)", " (--bucket)"), hint=hint)
        raise ConfigError(message, hint=hint)
    return name


_BUCKET_CHARS = re.compile(r"[a-z0-9][a-z0-9._-]*[a-z0-9]")


def bucket_name_rule(name: str) -> str | None:
    """The Cloud Storage naming rule `name` breaks, None when it keeps them all
    (https://cloud.google.com/storage/docs/buckets#naming): lowercase letters, digits,
    `-`, `_` and `.`, starting and ending with a letter or digit; 3 to 63 characters
    (up to 222 with dots, each dot-separated part at most 63); not an IP address; not
    starting with "goog" nor containing "google"."""
    if not _BUCKET_CHARS.fullmatch(name):
        return (
            "only lowercase letters, digits, -, _ and ., starting and ending with a letter or digit"
        )
    if len(name) < 3 or len(name) > (222 if "." in name else 63):
        return "3 to 63 characters (222 with dots)"
    if any(len(part) > 63 or not part for part in name.split(".")):
        return "each dot-separated part is 1 to 63 characters"
    if re.fullmatch(r"\d+\.\d+\.\d+\.\d+", name):
        return "not an IP address"
    if name.startswith("goog") or "google" in name:
        return 'not starting with "goog" nor containing "google"'
    return None


def bucket_source(flag: str | None, config: Mapping[str, Any], project: str) -> str:
    """Who named the bucket: "--bucket", "the config file", or "" (the default name)."""
    if flag:
        return "--bucket"
    return "the config file" if for_project(config, project).get("bucket") else ""


def check_owner(
    bucket: Bucket,
    project: str,
    project_number: Callable[[str], str],
    named_by: str,
    say: Callable[[str], None],
) -> None:
    """Before anything is uploaded: the bucket must belong to the job's project.

    The default name (`<project>-tpuctl`) is predictable and bucket names are global, so
    anyone may create it first in a project of their own and let this account in: the
    job's code and records would then be theirs to read and rewrite. Such a bucket is
    refused, naming its owner and the way out. A bucket the user named (`named_by`:
    --bucket or the config file) is trusted as given, and said so when another project
    owns it. A bucket that does not exist yet is created in the job's project.
    """
    owner = bucket.owner()
    if owner is None:
        return
    try:
        mine = project_number(project)
    except TpuctlError as e:
        if named_by:
            return  # trusted as given; nothing to compare it with
        raise ConfigError(
            f"cannot tell whether the bucket gs://{bucket.name} belongs to project {project}: "
            f"its number is not readable ({e.message})",
            hint="grant resourcemanager.projects.get (roles/browser), or name a bucket of "
            "yours with --bucket (or `bucket =` in the config file), which tpuctl then trusts",
        ) from None
    if owner == mine:
        return
    if named_by:
        say(
            f"using gs://{bucket.name} as given ({named_by}): it belongs to project number "
            f"{owner}, not to {project} ({mine})"
        )
        return
    raise ConfigError(
        f"the bucket gs://{bucket.name} belongs to another project (number {owner}), not to "
        f"{project} ({mine}): tpuctl will not put this project's code and job records there, "
        "where that project could read and rewrite them",
        hint="name a bucket of this project with --bucket gs://NAME (or `bucket =` in the "
        "config file); to use this one anyway, name it so",
    )


def left_out(staged: StagedJob) -> list[str]:
    """What the user is told of the files staging did not take as they are: one line for
    those it left out, one for those it took as read while they changed, one for those
    whose blob another writer had replaced."""
    said = []
    if staged.omitted:
        what = ", ".join(f"{path} ({why})" for path, why in sorted(staged.omitted.items()))
        said.append(f"left out of the job's code, as tpuctl's own: {what}")
    if staged.changed:
        names = ", ".join(staged.changed[:5]) + (", ..." if len(staged.changed) > 5 else "")
        said.append(
            f"staged as read: {names} changed while tpuctl read "
            f"{'it' if len(staged.changed) == 1 else 'them'}"
        )
    if staged.replaced:
        names = ", ".join(staged.replaced[:5]) + (", ..." if len(staged.replaced) > 5 else "")
        said.append(
            f"uploaded again: the bucket's copy of {names} was not that content (another "
            "writer of the bucket replaced it)"
        )
    return said


def _who() -> tuple[str, str]:
    return login_name() or "unknown", socket.gethostname()


@dataclass
class JobSpec:
    """What to run where: everything the job record holds except the manifest."""

    project: str
    zone: str
    node: str
    accelerator: str
    workers: int
    script: str
    bucket: str
    args: list[str] = field(default_factory=list)
    env_names: list[str] = field(default_factory=list)
    setup: str | None = None
    teardown: bool = False
    name: str | None = None
    job_id: str = field(default_factory=new_job_id)
    slices: int = 1  # a multislice job: `workers` counts every slice's
    environment: dict[str, Any] | None = None  # the requirement set (run/environment.py)
    owner: str = ""  # the `tpuctl-owner` label of the account that ran it (names.owner_label)
    # `tpuctl run --image`: {"name": the image by digest, "registry": its host}; `script`
    # is then "" when `args` is the command to run in the image (no code is staged)
    image: dict[str, str] | None = None


@dataclass
class StagedJob:
    job_id: str
    record: dict[str, Any]
    digest: str  # the request's sha256: what the agents are started with
    files: int  # in the manifest
    uploaded: int  # blobs written now
    uploaded_bytes: int
    omitted: dict[str, str] = field(default_factory=dict)  # left out by identity: why
    changed: list[str] = field(default_factory=list)  # staged as read, changing as it was
    replaced: list[str] = field(default_factory=list)  # whose blob was not theirs: sent again


def job_request(spec: JobSpec, manifest: Mapping[str, FileEntry]) -> dict[str, Any]:
    """What the job runs, exactly (protocol.REQUEST_KEYS): bound to its digest."""
    return {
        "version": REQUEST_VERSION,
        "id": spec.job_id,
        "script": spec.script,
        "args": list(spec.args),
        "setup": spec.setup,
        "env": sorted(spec.env_names),  # names only: values travel over SSH, never stored
        "manifest": {path: entry.to_json() for path, entry in sorted(manifest.items())},
        "environment": spec.environment,
        "image": spec.image,
    }


def job_record(spec: JobSpec, digest: str, workdir: Path) -> dict[str, Any]:
    """The job as the laptop's commands show it; the agents never run from it."""
    user, host = _who()
    now = time.time()
    return {
        "version": JOB_RECORD_VERSION,
        "id": spec.job_id,
        "name": spec.name or spec.job_id,
        "created": datetime.fromtimestamp(now, timezone.utc).isoformat().replace("+00:00", "Z"),
        "created_unix": round(now, 3),
        "user": user,
        "host": host,
        **({"owner": spec.owner} if spec.owner else {}),
        "project": spec.project,
        "zone": spec.zone,
        "node": spec.node,
        "accelerator": spec.accelerator,
        "workers": spec.workers,
        **({"slices": spec.slices} if spec.slices > 1 else {}),
        "script": spec.script,
        "args": list(spec.args),
        "env": sorted(spec.env_names),  # names only: values travel over SSH, never stored
        "setup": spec.setup,
        "teardown": spec.teardown,
        "bucket": spec.bucket,
        "workdir": str(workdir),
        "request": digest,  # the sha256 of request.json
        **({"image": spec.image["name"]} if spec.image else {}),
    }


def stage_job(
    bucket: Bucket,
    spec: JobSpec,
    workdir: Path,
    excludes: Iterable[str] = (),
    *,
    omit: Mapping[Identity, str] | None = None,
    workers: int = UPLOAD_WORKERS,
    progress: Callable[[int, int], None] | None = None,
) -> StagedJob:
    """Read the work dir's files and upload the missing blobs in parallel, then write the
    job record.

    `omit`: files and folders left out whatever the ignore rules say (workdir.select).
    `progress(done, total)` is called as files are checked off. The bucket must exist
    (`Bucket.ensure`). Returns what was staged and how much was uploaded.
    """
    root = workdir.resolve()
    # a command of the image: nothing of here runs, nothing is staged
    chosen = Selection([], {}) if spec.image and not spec.script else select(root, excludes, omit)
    if spec.script and spec.script not in chosen.files:
        why = "every file there is ignored" if not chosen.files else f"{spec.script} is not staged"
        raise UsageError(
            f"nothing to run from the work dir {root}: {why}",
            hint="the script must be a file in the work dir that no .gitignore (there, or "
            "above it in its git repository) and no --exclude leaves out",
        )
    present = {info.name[len(BLOBS) :]: info for info in bucket.objects(BLOBS)}
    done = 0
    lock = threading.Lock()
    with tempfile.TemporaryDirectory(prefix="tpuctl-stage-") as spool:
        sender = BlobSender(bucket, root, present, Path(spool))

        def one(relative: str) -> Snapshot:
            nonlocal done
            shot = sender.one(relative)
            with lock:
                done += 1
                if progress is not None:
                    progress(done, len(chosen.files))
            return shot

        with ThreadPoolExecutor(max_workers=max(1, min(workers, len(chosen.files)))) as pool:
            shots = dict(zip(chosen.files, pool.map(one, chosen.files), strict=True))
    manifest = {relative: shot.entry for relative, shot in shots.items()}
    request = job_request(spec, manifest)
    digest = request_digest(request)
    record = job_record(spec, digest, root)
    try:  # the request first: a record always names a request that exists
        bucket.write_json(request_path(spec.job_id), request, if_generation_match=0)
        bucket.write_json(job_record_path(spec.job_id), record, if_generation_match=0)
    except PreconditionFailedError:
        raise AlreadyExistsError(
            f"job {spec.job_id} already exists in gs://{bucket.name}", hint="pick another --name"
        ) from None
    changed = [relative for relative, shot in shots.items() if shot.changed]
    return StagedJob(
        spec.job_id,
        record,
        digest,
        len(manifest),
        len(sender.sent),
        sum(sender.sent),
        omitted=chosen.omitted,
        changed=changed,
        replaced=sorted(sender.replaced),
    )
