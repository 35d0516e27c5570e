"""Google's exceptions -> tpuctl's errors: the one translation the TPU, Storage and
Quotas adapters share (each adds only what its service says differently).

Imports only google.api_core and google.auth, so loading one adapter never loads
another service's client library.
"""

from __future__ import annotations

import re

from google.api_core import exceptions as gx
from google.auth import exceptions as auth_x

from tpuctl.cloud.retry import is_rate_limit, is_transient
from tpuctl.errors import (
    AccessDeniedError,
    AlreadyExistsError,
    CloudError,
    ConfigError,
    NotFoundError,
    QuotaError,
    TpuctlError,
)

_CALL_PREFIX = re.compile(r"^(GET|POST|PATCH|PUT|DELETE) \S+: ")


def server_message(exc: BaseException) -> str:
    """The server's own message, without api-core's "POST https://...: " prefix."""
    msg = str(getattr(exc, "message", None) or exc).strip()
    return _CALL_PREFIX.sub("", msg)


def refused(
    msg: str, reason: str | None, *, project: str, title: str, service: str, what: str, needs: str
) -> TpuctlError:
    """A 403 of an API other than the TPU's: not enabled in the project (what to enable),
    or not allowed (`needs`: the permission or role to grant) to read `what`."""
    if reason == "SERVICE_DISABLED" or "has not been used in project" in msg:
        return CloudError(
            f"the {title} ({service}) is not enabled in project {project}",
            hint=f"enable it with `gcloud services enable {service} --project {project}`",
        )
    return AccessDeniedError(
        f"not allowed to read the {what} of project {project}: {msg}",
        hint=f"your account needs {needs}",
    )


def translate(exc: BaseException, subject: str, where: str, unreachable_hint: str) -> TpuctlError:
    """Google's exception -> tpuctl's, with a hint on what to do next."""
    msg = server_message(exc)
    if isinstance(exc, gx.NotFound):
        return NotFoundError(
            f"{subject} not found", hint="`tpuctl list --all-zones` shows your nodes"
        )
    if isinstance(exc, gx.Conflict):
        return AlreadyExistsError(f"{subject} already exists", hint=msg)
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
