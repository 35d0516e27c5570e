"""One retry policy for every cloud call: transient faults only, bounded, jittered."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from tenacity import (
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    wait_random_exponential,
)

log = logging.getLogger("tpuctl.retry")
T = TypeVar("T")

MAX_ATTEMPTS = 8
MAX_SECONDS = 90.0


def is_rate_limit(exc: BaseException) -> bool:
    """A 429 that asks us to slow down, as opposed to a resource quota that is used up."""
    reason = getattr(exc, "reason", None)
    if reason in ("RATE_LIMIT_EXCEEDED", "rateLimitExceeded", "userRateLimitExceeded"):
        return True
    text = str(getattr(exc, "message", "") or exc).lower()
    return "per minute" in text or "rate limit" in text


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: the same call may well succeed in a moment."""
    import sys

    from google.api_core import exceptions as gx
    from google.auth import exceptions as auth_x

    transient: tuple[type[BaseException], ...] = (
        gx.InternalServerError,
        gx.BadGateway,
        gx.ServiceUnavailable,
        gx.GatewayTimeout,
        gx.DeadlineExceeded,
        ConnectionResetError,
        auth_x.TransportError,
    )
    # requests' faults, from the client libraries that use it (Cloud Storage's): none can
    # be raised by a process that has not loaded it, and importing it costs ~50 ms
    if (rx := sys.modules.get("requests.exceptions")) is not None:
        transient += (rx.ConnectionError, rx.Timeout, rx.ChunkedEncodingError)
    if isinstance(exc, transient):
        return True
    if isinstance(exc, (gx.TooManyRequests, gx.ResourceExhausted)):
        return is_rate_limit(exc)
    return False


def _log_retry(state: Any) -> None:
    exc = state.outcome.exception() if state.outcome else None
    log.debug("retrying after attempt %d: %r", state.attempt_number, exc)


def retrying(max_attempts: int = MAX_ATTEMPTS, max_seconds: float = MAX_SECONDS) -> Retrying:
    return Retrying(
        retry=retry_if_exception(is_transient),
        wait=wait_random_exponential(multiplier=0.2, max=10),
        stop=stop_after_attempt(max_attempts) | stop_after_delay(max_seconds),
        before_sleep=_log_retry,
        reraise=True,
    )


def call(
    fn: Callable[[], T],
    translate: Callable[[BaseException], BaseException],
    max_seconds: float = MAX_SECONDS,
) -> T:
    """The one seam every adapter call goes through: retry transient faults, then turn
    Google's exceptions (and transport faults) into tpuctl's with `translate`.

    tpuctl's own errors pass through; anything else is a bug and is not disguised.
    """
    from tpuctl.errors import TpuctlError

    try:
        for attempt in retrying(max_seconds=max_seconds):
            with attempt:
                return fn()
    except TpuctlError:
        raise
    except Exception as e:  # noqa: BLE001 - translated, never swallowed
        # imported on a failure only: google-api-core's exceptions load grpc (~70 ms)
        from google.api_core import exceptions as gx
        from google.auth import exceptions as auth_x

        if isinstance(e, (gx.GoogleAPICallError, auth_x.GoogleAuthError)) or is_transient(e):
            raise translate(e) from e
        raise
    raise AssertionError("unreachable")  # pragma: no cover
