"""Which faults are retried, and how Google's errors become tpuctl's."""

from __future__ import annotations

import pytest
import requests
from google.api_core import exceptions as gx

from tpuctl.cloud.errors import translate
from tpuctl.cloud.retry import is_transient, retrying
from tpuctl.errors import (
    AccessDeniedError,
    AlreadyExistsError,
    CloudError,
    ConfigError,
    NotFoundError,
    QuotaError,
    ServiceDisabledError,
)


@pytest.mark.parametrize(
    "exc",
    [
        gx.InternalServerError("boom"),
        gx.ServiceUnavailable("later"),
        gx.BadGateway("bad"),
        gx.GatewayTimeout("slow"),
        gx.TooManyRequests(
            "Quota exceeded for quota metric 'Requests' and limit 'Requests per "
            "minute' of service 'tpu.googleapis.com'"
        ),
        requests.ConnectionError("reset"),
        requests.Timeout("timeout"),
        ConnectionResetError(),
    ],
)
def test_transient(exc: BaseException) -> None:
    assert is_transient(exc)


@pytest.mark.parametrize(
    "exc",
    [
        gx.TooManyRequests(
            "Quota limit 'TPUV6EPreemptiblePerProjectPerRegionForTPUAPI' has been "
            "exceeded. Limit: 0 in region us-east5."
        ),
        gx.BadRequest("bad"),
        gx.InvalidArgument("bad"),
        gx.PermissionDenied("no"),
        gx.NotFound("gone"),
        gx.AlreadyExists("dup"),
        ValueError("bug"),
    ],
)
def test_not_transient(exc: BaseException) -> None:
    assert not is_transient(exc)


def test_retrying_gives_up_after_bounded_attempts() -> None:
    calls = []

    def flaky() -> None:
        calls.append(1)
        raise gx.ServiceUnavailable("down")

    policy = retrying(max_attempts=3)
    policy.wait = lambda _state: 0  # type: ignore[method-assign, assignment, return-value]
    with pytest.raises(gx.ServiceUnavailable):
        policy(flaky)
    assert len(calls) == 3


@pytest.mark.parametrize(
    ("exc", "kind", "needle"),
    [
        (gx.NotFound("x"), NotFoundError, "node 'n' in zone z not found"),
        (gx.AlreadyExists("x"), AlreadyExistsError, "already exists"),
        (
            gx.PermissionDenied("Permission denied on 'locations/zz' (or it may not exist)."),
            AccessDeniedError,
            "locations/zz",
        ),
        (gx.PermissionDenied("tpu.nodes.create denied"), AccessDeniedError, "permission denied"),
        (gx.TooManyRequests("Quota limit 'X' has been exceeded."), QuotaError, "quota exceeded"),
        (gx.ServiceUnavailable("down"), CloudError, "kept failing"),
        (gx.BadRequest("nope"), CloudError, "nope"),
    ],
)
def test_translate(exc: BaseException, kind: type, needle: str) -> None:
    err = translate(exc, "node 'n' in zone z", "Google Cloud", "hint")
    assert isinstance(err, kind)
    assert needle in str(err)


def _http_error(status: int, body: dict) -> gx.GoogleAPICallError:
    """An error as google-api-core builds it from a REST answer."""
    import json

    response = requests.Response()
    response.status_code = status
    response._content = json.dumps(body).encode()
    response.request = requests.Request("POST", "https://cloudquotas.googleapis.com/v1/x").prepare()
    return gx.from_http_response(response)


def test_user_credentials_without_a_quota_project_are_not_a_disabled_api() -> None:
    """A client-based API called with user ADC and no quota project answers
    SERVICE_DISABLED for gcloud's OAuth project: the fix is a quota project, never
    `gcloud services enable` in a project the user does not own."""
    message = (
        "Your application is authenticating by using local Application Default Credentials. "
        "The cloudquotas.googleapis.com API requires a quota project, which is not set by "
        "default. To learn how to set your quota project, see "
        "https://cloud.google.com/docs/authentication/adc-troubleshooting/user-creds ."
    )
    info = {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": "SERVICE_DISABLED",
        "domain": "googleapis.com",
        "metadata": {"consumer": "projects/764086051850", "service": "cloudquotas.googleapis.com"},
    }
    exc = _http_error(
        403,
        {
            "error": {
                "code": 403,
                "message": message,
                "status": "PERMISSION_DENIED",
                "details": [info],
            }
        },  # fmt: skip
    )
    err = translate(exc, "quotas of project p", "Google Cloud", "hint", project="p")
    assert isinstance(err, ConfigError) and not isinstance(err, ServiceDisabledError)
    assert "Cloud Quotas API (cloudquotas.googleapis.com) needs a quota project" in str(err)
    assert "gcloud auth application-default set-quota-project p" in (err.hint or "")
    assert "764086051850" not in str(err) + (err.hint or "")
