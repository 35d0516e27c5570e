"""Errors of the emulated API, shaped as Google's JSON error body with the real HTTP status.

google-api-core maps a REST error to its exception class by the HTTP status alone
(400 BadRequest, 403 Forbidden, 404 NotFound, 409 Conflict, 429 TooManyRequests, ...);
`status` and `details` are what gcloud prints and what callers can inspect.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field
from typing import Any

from tpuctl.emulator.core.projects import project_number

ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"
RESOURCE_INFO_TYPE = "type.googleapis.com/google.rpc.ResourceInfo"
BAD_REQUEST_TYPE = "type.googleapis.com/google.rpc.BadRequest"
QUOTA_FAILURE_TYPE = "type.googleapis.com/google.rpc.QuotaFailure"

# google.rpc.Code values, for errors carried inside an Operation
CODES = {
    "CANCELLED": 1,
    "INVALID_ARGUMENT": 3,
    "NOT_FOUND": 5,
    "ALREADY_EXISTS": 6,
    "PERMISSION_DENIED": 7,
    "RESOURCE_EXHAUSTED": 8,
    "FAILED_PRECONDITION": 9,
    "ABORTED": 10,
    "INTERNAL": 13,
    "UNAVAILABLE": 14,
}


class ApiError(Exception):
    """An error answer: HTTP status, canonical status name, message and details."""

    def __init__(
        self, http: int, status: str, message: str, details: list[dict[str, Any]] | None = None
    ) -> None:
        super().__init__(message)
        self.http = http
        self.status = status
        self.message = message
        self.details = details or []

    def to_dict(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.http, "message": self.message, "status": self.status}
        if self.details:
            error["details"] = self.details
        return {"error": error}


def _eid() -> str:
    # The service tags many of its messages with an error id like this one.
    return f"[EID: 0x{secrets.token_hex(8)}]"


def invalid_argument(message: str, field: str | None = None) -> ApiError:
    details = None
    if field:
        violation = {"field": field, "description": message}
        details = [{"@type": BAD_REQUEST_TYPE, "fieldViolations": [violation]}]
    return ApiError(400, "INVALID_ARGUMENT", message, details)


def bad_request(message: str) -> ApiError:
    """INVALID_ARGUMENT worded as the TPU service words its own validation failures."""
    return ApiError(
        400, "INVALID_ARGUMENT", f"Cloud TPU received a bad request. {message} {_eid()}"
    )


def failed_precondition(message: str) -> ApiError:
    return ApiError(400, "FAILED_PRECONDITION", message)


def permission_denied_location(project: str, zone: str, permission: str) -> ApiError:
    info = {
        "@type": ERROR_INFO_TYPE,
        "reason": "IAM_PERMISSION_DENIED",
        "domain": "tpu.googleapis.com",
        "metadata": {"permission": permission, "resource": f"projects/{project}/locations/{zone}"},
    }
    message = f"Permission denied on 'locations/{zone}' (or it may not exist)."
    return ApiError(403, "PERMISSION_DENIED", message, [info])


def not_found(resource: str) -> ApiError:
    info = {"@type": RESOURCE_INFO_TYPE, "resourceName": resource}
    return ApiError(404, "NOT_FOUND", f"Resource '{resource}' was not found", [info])


def already_exists(resource: str) -> ApiError:
    info = {"@type": RESOURCE_INFO_TYPE, "resourceName": resource}
    return ApiError(409, "ALREADY_EXISTS", f"Resource '{resource}' already exists", [info])


def no_route(method: str, path: str) -> ApiError:
    return ApiError(404, "NOT_FOUND", f"The requested URL {path} was not found ({method}).")


FAULT_CODES = (429, 500, 503, 504)


@dataclass
class Faults:
    """Injected failures: `rate` of API calls fail with one of `codes`; `after_rate` of
    those fail only after the call took effect. `delay` seconds are added to every call.
    `paths`, a regular expression, limits failures to calls whose path and query (as
    sent) it matches; `quota` makes 429s quota-exceeded errors instead of rate limits;
    `count`, when given, is how many failures are left to inject (then none: a fault that
    hits only a first attempt)."""

    rate: float = 0.0
    codes: list[int] = field(default_factory=lambda: [429, 500, 503])
    delay: float = 0.0
    after_rate: float = 0.0
    seed: int | None = None
    paths: str | None = None
    quota: bool = False
    count: int | None = None

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> Faults:
        """Faults from a control-plane body; unknown keys or bad values are refused."""
        try:
            faults = cls(**body)
            rates = (float(faults.rate), float(faults.after_rate))
            ok = all(0 <= r <= 1 for r in rates) and float(faults.delay) >= 0
            re.compile(faults.paths or "")
            ok = ok and bool(faults.codes) and set(faults.codes) <= set(FAULT_CODES)
            count = faults.count
            ok = ok and (count is None or (type(count) is int and count >= 0))
        except (TypeError, ValueError, re.error):
            ok = False
        if not ok:
            raise invalid_argument(
                "faults take rate and after_rate in [0, 1], delay >= 0, seed, paths (a regular "
                f"expression), quota, count (>= 0), and codes among {list(FAULT_CODES)}"
            )
        return faults


def injected(http: int, project: str, zone: str | None = None, quota: bool = False) -> ApiError:
    """The error an injected fault answers with, as Google's front end words it."""
    if http == 429 and quota:
        region = zone.rsplit("-", 1)[0] if zone and zone != "-" else "us-central1"
        quota_id = "TPUV6EPreemptiblePerProjectPerRegionForTPUAPI"
        return quota_exceeded(project, quota_id, 0, "region", region)
    if http == 429:
        info = {
            "@type": ERROR_INFO_TYPE,
            "reason": "RATE_LIMIT_EXCEEDED",
            "domain": "googleapis.com",
            "metadata": {
                "service": "tpu.googleapis.com",
                "consumer": f"projects/{project_number(project)}",
                "quota_metric": "tpu.googleapis.com/default_requests",
                "quota_limit": "defaultPerMinutePerProject",
            },
        }
        message = (
            "Quota exceeded for quota metric 'Default requests' and limit 'Default requests "
            "per minute' of service 'tpu.googleapis.com' for consumer "
            f"'project_number:{project_number(project)}'."
        )
        return ApiError(429, "RESOURCE_EXHAUSTED", message, [info])
    if http == 500:
        return ApiError(500, "INTERNAL", "Internal error encountered.")
    if http == 503:
        return ApiError(503, "UNAVAILABLE", "The service is currently unavailable.")
    if http == 504:
        return ApiError(504, "DEADLINE_EXCEEDED", "The request timed out. Please try again.")
    raise ValueError(f"no injectable fault with HTTP status {http}")


def eid() -> str:
    return _eid()


def quota_exceeded(project: str, quota_id: str, limit: int, dimension: str, where: str) -> ApiError:
    """A used-up resource quota, as the TPU API answers a create (HTTP 429)."""
    return quotas_exceeded(project, [(quota_id, limit, dimension, where)])


def quotas_exceeded(project: str, violations: list[tuple[str, int, str, str]]) -> ApiError:
    """One or more used-up quotas (id, limit, dimension, where), as the TPU API answers a
    create (HTTP 429). Several are joined with commas in one sentence, as public output
    shows: `Quota limit 'A,B' has been exceeded. Limit: 0,0 in region R,zone Z.`"""
    ids = ",".join(v[0] for v in violations)
    limits = ",".join(str(v[1]) for v in violations)
    scopes = ",".join(f"{v[2]} {v[3]}" for v in violations)
    message = f"Quota limit '{ids}' has been exceeded. Limit: {limits} in {scopes}."
    failure = {
        "@type": QUOTA_FAILURE_TYPE,
        "violations": [
            {
                "subject": f"project:{project_number(project)}",
                "description": f"Quota '{quota_id}' exhausted. Limit {limit} in {dim} {where}",
            }
            for quota_id, limit, dim, where in violations
        ],
    }
    return ApiError(429, "RESOURCE_EXHAUSTED", message, [failure])


def service_disabled(project: str, service: str, title: str) -> ApiError:
    """403 for an API that is not enabled in the project, as every Google API words it."""
    number = project_number(project)
    url = f"https://console.developers.google.com/apis/api/{service}/overview?project={number}"
    message = (
        f"{title} has not been used in project {number} before or it is disabled. Enable it by "
        f"visiting {url} then retry. If you enabled this API recently, wait a few minutes for "
        "the action to propagate to our systems and retry."
    )
    info = {
        "@type": ERROR_INFO_TYPE,
        "reason": "SERVICE_DISABLED",
        "domain": "googleapis.com",
        "metadata": {
            "service": service,
            "consumer": f"projects/{number}",
            "activationUrl": url,
            "serviceTitle": title,
            "containerInfo": number,
        },
    }
    return ApiError(403, "PERMISSION_DENIED", message, [info])


def permission_denied(permission: str, resource: str) -> ApiError:
    """403 for a caller without `permission` on `resource` (a full resource name)."""
    info = {
        "@type": ERROR_INFO_TYPE,
        "reason": "IAM_PERMISSION_DENIED",
        "domain": "cloudquotas.googleapis.com",
        "metadata": {"permission": permission, "resource": resource},
    }
    message = f"Permission '{permission}' denied on resource '{resource}' (or it may not exist)."
    return ApiError(403, "PERMISSION_DENIED", message, [info])
