"""The laptop's one reader of tpuctl's records in the bucket (statuses, job records,
cancel marks, leases, receipts): each read through `Bucket.read_json`, which bounds the
bytes received and never decodes them (cloud/storage.py), then checked against the
record's schema here before any field is used.

The bucket is shared ground: whoever can write it (every job VM of a default project)
can put any bytes under any name. So a record that is not what tpuctl writes (not JSON,
too large, encoded, a field of the wrong type) is skipped, never a crash: `read` returns
None and notes one line naming the object and why, which the command prints once at its
end (`take`, cli/__init__.py). A field a schema does not name is kept as it is: it is
for whoever reads it to check (an agent of a newer tpuctl may add fields).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from tpuctl.agent.protocol import JOB_ID_RE, JOBS, job_record_path
from tpuctl.errors import NotFoundError, UnreadableObjectError, UsageError
from tpuctl.wording import printable

if TYPE_CHECKING:
    from tpuctl.cloud.storage import Bucket

Record = dict[str, Any]
T = TypeVar("T")
Schema = dict[str, tuple[type, ...]]

_NONE = type(None)
_NUMBER = (int, float)
_MAYBE_NUMBER = (int, float, _NONE)
_MAYBE_INT = (int, _NONE)
_MAYBE_TEXT = (str, _NONE)

# A worker's status (agent/job.py writes it; protocol.py says how it changes).
STATUS: Schema = {
    "worker": (int,),
    "attempt": (int,),
    "state": (str,),
    "pid": _MAYBE_INT,
    "agent_pid": _MAYBE_INT,
    "child_pid": _MAYBE_INT,
    "started": _MAYBE_NUMBER,
    "ended": _MAYBE_NUMBER,
    "hung_since": _MAYBE_NUMBER,
    "exit_status": _MAYBE_INT,
    "log": _MAYBE_TEXT,
    "message": _MAYBE_TEXT,
    "notice": _MAYBE_TEXT,
    "cancel": (bool, _NONE),
    "environment": (dict, _NONE),
    "chips": (list, dict, _NONE),
}
# A job's record (services/staging.py writes it): a description for the laptop's commands
# (its worker and slice counts are bounded where it is read: read_job_record).
JOB_RECORD: Schema = {
    "id": (str,),
    "name": _MAYBE_TEXT,
    "node": _MAYBE_TEXT,
    "project": _MAYBE_TEXT,
    "zone": _MAYBE_TEXT,
    "created": _MAYBE_TEXT,
    "created_unix": _MAYBE_NUMBER,
    "teardown": (bool, _NONE),
    "owner": _MAYBE_TEXT,  # the tpuctl-owner label of the account that ran it
    "accelerator": _MAYBE_TEXT,
    "image": _MAYBE_TEXT,  # `run --image`: the image by its digest, as every worker ran it
}
ANY: Schema = {}  # a record whose fields its reader checks itself

# The most workers and slices a job record may claim: a record is shared ground, and what
# reads it sizes lists and plans by these counts (the largest slice today has 2,304 hosts)
MOST_WORKERS = 1 << 16
MOST_SLICES = 1 << 10

_notes: dict[str, str] = {}
_lock = threading.Lock()


def read(bucket: Bucket, path: str, schema: Schema, what: str) -> Record | None:
    """The record at `path` if it is one (a JSON object whose fields have the schema's
    types); None when absent, or when it is not one (noted: `take`)."""
    try:
        value, _ = bucket.read_json(path)
    except NotFoundError:
        return None
    except UnreadableObjectError as e:
        note(f"gs://{bucket.name}/{path}", e.message)
        return None
    why = problem(value, schema)
    if why is not None:
        note(f"gs://{bucket.name}/{path}", f"not a {what}: {why}")
        return None
    return dict(value)


def parsed(bucket: Bucket, path: str, what: str, parse: Callable[[Record], T | None]) -> T | None:
    """What `parse` makes of the record at `path` (a JSON object): None when absent, or
    when it or `parse` says it is not a `what` (noted: `take`)."""
    value = read(bucket, path, ANY, what)
    found = None if value is None else parse(value)
    if value is not None and found is None:
        note(f"gs://{bucket.name}/{path}", f"not a {what} tpuctl writes")
    return found


def read_job_record(bucket: Bucket, job_id: str) -> Record:
    """The job record of `job_id`: NotFoundError when there is none, UnreadableObjectError
    (naming it) when what is there is not one; its `workers` and `slices` counts are
    whole numbers from 1 to their bound (1 where the record has anything else)."""
    if not JOB_ID_RE.match(job_id):
        raise UsageError(f"bad job id {job_id!r}: job ids look like 20261129-153012-ab12cd")
    value, _ = bucket.read_json(job_record_path(job_id))
    why = problem(value, JOB_RECORD)
    if why is not None:
        raise UnreadableObjectError(
            f"gs://{bucket.name}/{job_record_path(job_id)} is not a job record: {why}",
            hint="another principal with write access to the bucket may have written it",
        )
    record = dict(value)
    for key, most in (("workers", MOST_WORKERS), ("slices", MOST_SLICES)):
        count = record.get(key, 1)
        ok = isinstance(count, int) and not isinstance(count, bool) and 1 <= count <= most
        record[key] = count if ok else 1
    return record


def list_job_ids(bucket: Bucket) -> list[str]:
    """Every job id in the bucket, oldest first."""
    ids = (p[len(JOBS) :].rstrip("/") for p in bucket.list_prefixes(JOBS))
    return sorted(i for i in ids if JOB_ID_RE.match(i))


def problem(value: Any, schema: Schema) -> str | None:
    """Why `value` is not a record of `schema` (None when it is one)."""
    if not isinstance(value, dict):
        return f"a JSON {type(value).__name__}, not an object"
    for key, types in schema.items():
        if key not in value:
            continue
        found = value[key]
        wrong = not isinstance(found, types) or (isinstance(found, bool) and bool not in types)
        if wrong or (isinstance(found, float) and found != found):  # NaN is no number
            names = " or ".join("null" if t is _NONE else t.__name__ for t in types)
            return f"its {key!r} is {type(found).__name__}, not {names}"
    return None


def note(subject: str, why: str) -> None:
    """Say once, at the command's end, that `subject` was skipped and why."""
    with _lock:
        _notes.setdefault(subject, why)


def take() -> list[str]:
    """The lines to print for what was skipped (each once, escaped), and forget them."""
    with _lock:
        found = sorted(_notes.items())
        _notes.clear()
    return [printable(f"skipped {subject}: {why}") for subject, why in found]
