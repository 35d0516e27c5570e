"""One REST call through the credentials' session (cloud/session.py), for the Google APIs
tpuctl reads without a client library (Compute Engine, Resource Manager, IAM, and the reads `tpuctl
list` makes: the TPU API's lists and Cloud Monitoring's time series): the answer's JSON,
or google-api-core's exception built from the HTTP answer, retried and translated as
every adapter's calls are (`cloud/retry.py`, `cloud/errors.py`)."""

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
    from tpuctl.cloud import retry

    def translated(e: BaseException) -> BaseException:
        from tpuctl.cloud.errors import translate

        return translate(e, subject, where, hint, project)

    return retry.call(lambda: send(session, method, url, **kw), translated)


def send(session: Callable[[], Any], method: str, url: str, **kw: Any) -> Any:
    """One request, not retried: its JSON answer ({} if empty), or google-api-core's
    exception for any answer but a 2xx (a redirect included: never followed)."""
    kw.setdefault("timeout", TIMEOUT)
    response = session().request(method, url, **kw)
    if not 200 <= response.status_code < 300:
        # on a failure only: google-api-core's exceptions load grpc (~70 ms)
        from google.api_core import exceptions as gx

        raise gx.from_http_response(response)
    return response.json() if response.content else {}
