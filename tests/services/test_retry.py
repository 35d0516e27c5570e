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
    NotFoundError,
    QuotaError,
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
