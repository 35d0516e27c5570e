"""Google's exceptions -> tpuctl's errors: the one translation the TPU, Storage, Quotas
and Service Usage adapters share (each adds only what its service says differently).

The errors a new project meets are recognised here, whichever API answers them
(`setup_error`): an API not enabled (403, ErrorInfo reason SERVICE_DISABLED), billing
off (403, BILLING_DISABLED) and a caller without a permission (403, "Permission 'p'
denied ..."), each told in one line with the command that fixes it.

Imports only google.api_core and google.auth, so loading one adapter never loads
another service's client library.
"""

from __future__ import annotations

import re

from google.api_core import exceptions as gx
from google.auth import exceptions as auth_x

from tpuctl import google_apis
from tpuctl.cloud.retry import is_rate_limit, is_transient
from tpuctl.errors import (
    AccessDeniedError,
    AlreadyExistsError,
    BillingDisabledError,
    CloudError,
    ConfigError,
    NotFoundError,
    PermissionDeniedError,
    PolicyRefusedError,
    PreconditionFailedError,
    QuotaError,
    ServiceAgentError,
    ServiceDisabledError,
    TpuctlError,
)

_CALL_PREFIX = re.compile(r"^(GET|POST|PATCH|PUT|DELETE) \S+: ")
# User credentials from `gcloud auth application-default login` bill the calls to the
# project of gcloud's OAuth client unless they name a quota project; "client-based" APIs
# refuse that with 403 SERVICE_DISABLED naming that other project, in these words
# (https://cloud.google.com/docs/authentication/adc-troubleshooting/user-creds; public
# outputs: GoogleCloudPlatform/cloud-foundation-fabric#2622,
# googleapis/google-auth-library-python#1459). Enabling the API cannot fix that.
_NO_QUOTA_PROJECT = re.compile(r"The (?P<service>[a-z0-9.-]+) API requires a quota project")
_DISABLED = re.compile(r"has not been used in project (?P<number>\S+) before or it is disabled")
_SERVICE_URL = re.compile(r"/apis/api/(?P<service>[a-z0-9.-]+)/")
_PERMISSION = re.compile(
    r"Permission '(?P<permission>[A-Za-z0-9_.]+)' denied"
    r"|Required '(?P<compute>compute\.[A-Za-z0-9_.]+)' permission for"  # Compute Engine's words
)
_CONSTRAINT = re.compile(r"constraints/(?P<name>[A-Za-z0-9_.]+)")
_LOCATION = re.compile(r"in \[(?P<location>[a-z0-9-]+)\]")
_SERVICE_AGENT = re.compile(
    r"service-(?P<number>\d+)@(?:cloud-tpu|gcp-sa-tpu)\.iam\.gserviceaccount\.com"
)
_PROJECT = re.compile(r"projects/(?P<project>[^/\s']+)|project (?P<named>[a-z][a-z0-9:.-]+)")


def server_message(exc: BaseException) -> str:
    """The server's own message, without api-core's "POST https://...: " prefix."""
    msg = str(getattr(exc, "message", None) or exc).strip()
    return _CALL_PREFIX.sub("", msg)


def _info(exc: BaseException) -> tuple[str, dict[str, str]]:
    """The ErrorInfo's reason and metadata ("" and {} when the error carries none)."""
    try:
        reason = getattr(exc, "reason", None) or ""
        metadata = dict(getattr(exc, "metadata", None) or {})
    except (AttributeError, TypeError, ValueError):
        return "", {}
    return str(reason), {str(k): str(v) for k, v in metadata.items()}


def _project(
    project: str | None, subject: str, exc: BaseException, metadata: dict[str, str]
) -> str:
    """The project id when the caller knows it, else from the subject or the URL called
    (api-core puts it before the message), else the project number of the error."""
    if project:
        return project
    for text in (subject, str(exc)):
        found = _PROJECT.search(text)
        if found:
            return found["project"] or found["named"]
    return metadata.get("consumer", "").removeprefix("projects/") or "?"


def setup_error(
    exc: BaseException, subject: str = "", project: str | None = None
) -> TpuctlError | None:
    """The errors a new project meets, from any Google API: a disabled API, billing off,
    a missing permission; None for any other error."""
    if not isinstance(exc, (gx.Forbidden, gx.BadRequest)):
        return None
    msg = server_message(exc)
    reason, metadata = _info(exc)
    org = _policy_error(msg, subject, project, exc, metadata)
    if org is not None:
        return org
    if isinstance(exc, gx.BadRequest):
        # Service Usage refuses to enable a paid API in a project without billing
        if reason != "UREQ_PROJECT_BILLING_NOT_FOUND":
            return None
        reason = "BILLING_DISABLED"
    no_quota_project = _NO_QUOTA_PROJECT.search(msg)
    if no_quota_project:
        service = metadata.get("service") or no_quota_project["service"]
        where = project or "PROJECT"
        return ConfigError(
            f"the {google_apis.title(service)} ({service}) needs a quota project, and your "
            "Application Default Credentials (user credentials) name none",
            hint=f"set one: `gcloud auth application-default set-quota-project {where}` "
            f"(or export GOOGLE_CLOUD_QUOTA_PROJECT={where}); the caller needs "
            "serviceusage.services.use in it (roles/serviceusage.serviceUsageConsumer)",
        )
    if reason == "SERVICE_DISABLED" or _DISABLED.search(msg):
        url = _SERVICE_URL.search(msg)
        service = metadata.get("service") or (url["service"] if url else "") or "the API"
        title = metadata.get("serviceTitle") or google_apis.title(service)
        where = _project(project, subject, exc, metadata)
        return ServiceDisabledError(
            f"the {title} ({service}) is disabled in project {where}",
            service=service,
            project=where,
            hint=f"enable it: `{google_apis.enable_command(service, where)}` "
            "(or run `tpuctl init`)",
        )
    if reason == "BILLING_DISABLED" or "requires billing to be enabled" in msg:
        where = _project(project, subject, exc, metadata)
        return BillingDisabledError(
            f"billing is disabled in project {where}: Cloud TPU and the APIs it needs are paid",
            hint=f"link a billing account: `gcloud billing projects link {where} "
            "--billing-account=ACCOUNT_ID` (`gcloud billing accounts list` shows yours)",
        )
    if msg.startswith("Permission denied on 'locations/"):
        return None  # an unknown zone looks like this too: `translate` tells it apart
    denied = _PERMISSION.search(msg)
    permission = metadata.get("permission") or (
        (denied["permission"] or denied["compute"]) if denied else ""
    )
    if permission and (reason == "IAM_PERMISSION_DENIED" or denied):
        where = _project(project, subject, exc, metadata)
        role = google_apis.role_for(permission)
        grant = (
            f"grant a role that has it, e.g. `{google_apis.grant_command(where, role)}`"
            if role
            else "ask a project owner for a role that has it"
        )
        return PermissionDeniedError(
            f"permission {permission} denied in project {where}",
            permission=permission,
            hint=f"{grant}; `gcloud auth list` shows who you are",
        )
    return None


def _policy_error(
    msg: str, subject: str, project: str | None, exc: BaseException, metadata: dict[str, str]
) -> TpuctlError | None:
    """An organisation policy's refusal, or the TPU service agent's, in one line with what
    to do; None for anything else."""
    agent = _SERVICE_AGENT.search(msg)
    if agent is not None:
        where = _project(project, subject, exc, metadata)
        email = agent.group(0)
        return ServiceAgentError(
            f"the Cloud TPU service agent of project {where} ({email}) is missing or lacks "
            "roles/tpu.serviceAgent",
            hint=f"recreate it: `gcloud beta services identity create --service=tpu.googleapis.com"
            f" --project {where}`, then `gcloud projects add-iam-policy-binding {where} "
            f"--member=serviceAccount:{email} --role=roles/tpu.serviceAgent`",
        )
    found = _CONSTRAINT.search(msg)
    if found is None or "violat" not in msg:
        return None
    name = found["name"]
    where = _project(project, subject, exc, metadata)
    describe = (
        f"`gcloud resource-manager org-policies describe {name} --project {where} --effective`"
    )
    if name == "gcp.resourceLocations":
        place = _LOCATION.search(msg)
        location = place["location"] if place else "this location"
        return PolicyRefusedError(
            f"an organisation policy (constraints/{name}) does not allow {location} in "
            f"project {where}",
            constraint=f"constraints/{name}",
            hint=f"use a zone it allows ({describe} lists them), or ask your organisation's "
            "policy administrator",
        )
    if name == "compute.vmExternalIpAccess":
        return PolicyRefusedError(
            f"an organisation policy (constraints/{name}) forbids external IP addresses on "
            f"VMs in project {where}",
            constraint=f"constraints/{name}",
            hint="create the node with --internal-ip-only and reach it from inside its network "
            "(`tpuctl ssh NAME --internal-ip`)",
        )
    return PolicyRefusedError(
        f"an organisation policy (constraints/{name}) refuses this in project {where}: {msg}",
        constraint=f"constraints/{name}",
        hint=f"{describe} shows the policy; ask your organisation's policy administrator",
    )


def refused(exc: BaseException, *, project: str, what: str, needs: str) -> TpuctlError:
    """A 403 of an API other than the TPU's: what a new project meets (`setup_error`:
    disabled, billing, a named permission), else not allowed to read `what` (`needs`: the
    permission or role to grant)."""
    setup = setup_error(exc, project=project)
    if setup is not None:
        return setup
    return AccessDeniedError(
        f"not allowed to read the {what} of project {project}: {server_message(exc)}",
        hint=f"your account needs {needs}",
    )


def translate(
    exc: BaseException, subject: str, where: str, unreachable_hint: str, project: str | None = None
) -> TpuctlError:
    """Google's exception -> tpuctl's, with a hint on what to do next."""
    msg = server_message(exc)
    setup = setup_error(exc, subject, project)
    if setup is not None:
        return setup
    if isinstance(exc, gx.NotFound):
        return NotFoundError(
            f"{subject} not found", hint="`tpuctl list --all-zones` shows your nodes"
        )
    if isinstance(exc, gx.Conflict):
        return AlreadyExistsError(f"{subject} already exists", hint=msg)
    if isinstance(exc, gx.PreconditionFailed):  # a stale fingerprint (Compute's 412)
        return PreconditionFailedError(f"{subject} changed meanwhile: {msg}")
    if isinstance(exc, gx.Forbidden):
        if "may not exist" in msg and "locations/" in msg:
            return AccessDeniedError(
                f"{msg.rstrip('.')}",
                hint="check --zone (Cloud TPU zones look like us-central1-a) and that the TPU API "
                "is enabled in the project",
            )
        return AccessDeniedError(
            f"permission denied on {subject}: {msg}",
            hint="your account needs roles/tpu.admin (or tpu.nodes.* permissions) in the project; "
            "check `gcloud auth list`",
        )
    if isinstance(exc, (gx.Unauthorized, auth_x.RefreshError, auth_x.DefaultCredentialsError)):
        return ConfigError(
            f"Google Cloud rejected the credentials: {msg}",
            hint="run `gcloud auth application-default login`",
        )
    if isinstance(exc, (gx.TooManyRequests, gx.ResourceExhausted)) and not is_rate_limit(exc):
        return QuotaError(f"quota exceeded: {msg}", hint="`tpuctl quota` shows limits and usage")
    if is_transient(exc) and not isinstance(exc, gx.GoogleAPICallError):
        # A transport fault: say what the socket said, not urllib3's whole story.
        errno = re.search(r"\[Errno -?\d+\] ([^'\")]+)", msg)
        reason = errno.group(1).strip() if errno else (msg or type(exc).__name__)
        return CloudError(f"cannot reach {where} for {subject}: {reason}", hint=unreachable_hint)
    if is_transient(exc):
        return CloudError(
            f"{where} kept failing for {subject}: {msg or type(exc).__name__}",
            hint="try again in a minute",
        )
    if isinstance(exc, gx.GoogleAPICallError):
        return CloudError(f"{subject}: {msg}")
    return CloudError(f"{subject}: {type(exc).__name__}: {msg}")
