"""Before the user's script starts: can this VM's service account do what the job needs?

Standard library only, Python 3.8+. `agent start` runs `check` before it detaches, so a
missing permission ends the job at once, in the start's answer, instead of as a job
whose statuses never appear or whose node is never deleted. The checks:
- Cloud Storage: read the job's record (storage.objects.get), write and delete a probe
  object under the job's folder (storage.objects.create, storage.objects.delete: the
  agent overwrites its status objects, and an overwrite needs both).
- The TPU API, on the worker that tears down (worker 0, when the job asks for it):
  Cloud Resource Manager's `projects.testIamPermissions` for `tpu.nodes.delete` (and
  `tpu.queuedresources.delete` on a multislice job). The TPU v2 API has no
  testIamPermissions of its own (neither its discovery document nor google-cloud-tpu
  has one), and deleting is the one thing no probe may try. Resource Manager's method
  needs no permission, but its API may be off in the project: then a GET of this node
  proves at least the scope and tpu.nodes.get, and the log says so.
A refusal becomes a `Problem`: what is missing, and the fix as a gcloud command.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable

from .metadata import metadata
from .net import HttpError, http
from .protocol import job_path
from .storage import Storage
from .target import Target

CRM_URL = os.environ.get("TPUCTL_CRM_URL", "https://cloudresourcemanager.googleapis.com").rstrip(
    "/"
)
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"


class Problem(Exception):
    """The service account cannot do something the job needs."""

    def __init__(self, message: str, fix: str, permission: str = "") -> None:
        super().__init__(message)
        self.message, self.fix, self.permission = message, fix, permission


def _scope_problem(what: str, account: str) -> Problem:
    scopes = ", ".join(s for s in metadata("instance/service-accounts/default/scopes").split())
    return Problem(
        f"the VM's token (service account {account}) lacks the OAuth scope for {what} "
        f"(its scopes: {scopes or 'none'}); a node's scopes are fixed at creation",
        f"create the node with the scope {CLOUD_PLATFORM} (tpuctl's default: drop "
        "--scopes, or add cloud-platform to it)",
    )


def _is_scope(error: HttpError) -> bool:
    text = str(error)
    return "ACCESS_TOKEN_SCOPE_INSUFFICIENT" in text or "scope" in text.lower()


def _refused(
    error: HttpError, service: str, account: str, message: str, fix: str, permission: str
) -> Problem:
    """A 403 as the Problem it is: a scope the token lacks, else `message`; any other
    error is re-raised (it is no answer about rights)."""
    if error.status != 403:
        raise error
    if _is_scope(error):
        return _scope_problem(service, account)
    return Problem(message, fix, permission)


def check_storage(storage: Storage, job_id: str, worker: int, account: str) -> Any:
    """The job's record (None if absent), once read, a probe written and deleted."""
    bucket = storage.bucket
    fix = (
        f"gcloud storage buckets add-iam-policy-binding gs://{bucket} "
        f"--member=serviceAccount:{account} --role=roles/storage.objectUser"
    )
    probe = job_path(job_id, "probe", f"worker-{worker}")
    steps: list[Any] = [
        ("storage.objects.get", lambda: storage.read_json(job_path(job_id, "job.json"))[0]),
        ("storage.objects.create", lambda: storage.write(probe, b"probe\n", "text/plain")),
        ("storage.objects.delete", lambda: storage.http("DELETE", _object_url(storage, probe))),
    ]
    record = None
    for permission, step in steps:
        try:
            result = step()
        except HttpError as e:
            message = f"the VM's service account {account} lacks {permission} on gs://{bucket}"
            raise _refused(e, "Cloud Storage", account, message, fix, permission) from None
        if permission == "storage.objects.get":
            record = result
    return record


def _object_url(storage: Storage, name: str) -> str:
    from urllib.parse import quote

    return f"{storage.objects_url}/{quote(name, safe='')}"


def _said(error: HttpError) -> str:
    """The message of a Google error body (its first 500 bytes), else its first line."""
    text = str(error).split(": ", 1)[-1]
    try:
        return str(json.loads(text)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        line = text.strip().splitlines()[0] if text.strip() else f"HTTP {error.status}"
        return line[:200]


def check_teardown(
    token: Any,
    me: Any,
    account: str,
    multislice: bool,
    say: Callable[[str], None],
    node: Target,
) -> None:
    """Whether the account may delete the job's node (`node`), or its queued resource."""
    project = me["project"]
    wanted = list(node.permissions) + (["tpu.queuedresources.delete"] if multislice else [])
    body = json.dumps({"permissions": wanted}).encode()
    url = f"{CRM_URL}/v1/projects/{project}:testIamPermissions"
    headers = token.headers(**{"Content-Type": "application/json"})
    try:
        reply = http("POST", url, body, headers, attempts=3, timeout=30)[2]
    except HttpError as e:
        if e.status == 403 and "ACCESS_TOKEN_SCOPE_INSUFFICIENT" in str(e):
            raise _scope_problem("Google Cloud APIs", account) from None
        say(
            f"preflight: Resource Manager's testIamPermissions answered {_said(e)}; checking "
            f"that {node.called} answers instead ({wanted[0]} is not proven)"
        )
        _check_node_get(me, account, node)
        return
    held = set(json.loads(reply or b"{}").get("permissions") or [])
    missing = [p for p in wanted if p not in held]
    if missing:
        raise Problem(
            f"the VM's service account {account} lacks {missing[0]} in project {project}: "
            f"it could not delete its {node.what} at the end of the job",
            _grant(project, account, node.role),
            missing[0],
        )


def _grant(project: str, account: str, role: str) -> str:
    return (
        f"gcloud projects add-iam-policy-binding {project} "
        f"--member=serviceAccount:{account} --role={role}"
    )


def _check_node_get(me: Any, account: str, node: Target) -> None:
    try:
        node.read()
    except HttpError as e:
        message = f"the VM's service account {account} may not read its {node.what} ({_said(e)})"
        fix = _grant(me["project"], account, node.role)
        raise _refused(e, node.called, account, message, fix, node.read_permission) from None


def check(
    storage: Storage,
    me: Any,
    job_id: str,
    worker: int,
    multislice: bool,
    say: Callable[[str], None],
    node: Target,
    teardown: bool = False,
) -> Problem | None:
    """None when the job can go on, else the first Problem found (`teardown`: worker 0
    deletes the node at the end, so its account must be allowed to)."""
    account = metadata("instance/service-accounts/default/email").strip()
    try:
        check_storage(storage, job_id, worker, account)
        if worker == 0 and teardown:
            check_teardown(storage.token, me, account, multislice, say, node)
    except Problem as p:
        return p
    return None
