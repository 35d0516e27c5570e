"""One REST call through google-auth's `AuthorizedSession`, for the few Google APIs tpuctl
calls without a client library (Compute's `projects.get`, Resource Manager, IAM): the
answer's JSON, or google-api-core's exception built from the HTTP answer, retried and
translated as every adapter's calls are (`cloud/retry.py`, `cloud/errors.py`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

TIMEOUT = 30.0


def call(
    session: Callable[[], Any],
    method: str,
    url: str,
    *,
    subject: str,
    where: str,
    hint: str,
    project: str,
    **kw: Any,
) -> Any:
    """`method url` (`kw`: the request's params, json...); its JSON answer ({} if empty)."""
    from google.api_core import exceptions as gx

    from tpuctl.cloud import retry
    from tpuctl.cloud.errors import translate

    def send() -> Any:
        response = session().request(method, url, timeout=TIMEOUT, **kw)
        if response.status_code >= 400:
            raise gx.from_http_response(response)
        return response.json() if response.content else {}

    return retry.call(send, lambda e: translate(e, subject, where, hint, project))
