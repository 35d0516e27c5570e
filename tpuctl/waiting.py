"""Waiting and retrying: one way for the whole client, services and cloud adapters alike.

Every pause tpuctl takes between two tries goes through here, built on tenacity:
- `poll_until` asks a question until it has an answer (a node READY, host keys
  published, an operation done), reporting the state it sees to a `Progress` callback;
- `retrying` / `aretrying` run an action again while a predicate says its failure is
  worth another try (a dropped SSH connection, a booting VM, no capacity yet).

Pauses grow geometrically up to a cap, and no pause is taken that would end past the
deadline: a caller learns it has run out of time at once, not after a last long sleep.
`cloud/retry.py` keeps its own tenacity policy for transient API faults (jittered, by
attempts and seconds), as a seam every adapter call goes through.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from tenacity import AsyncRetrying, RetryCallState, Retrying

T = TypeVar("T")

Progress = Callable[[str, float], None]
"""Called with (state, seconds waited) while a service waits on the cloud."""

FOREVER = float("inf")


def noop(state: str, elapsed: float) -> None:
    """A `Progress` that reports nothing."""


def backoff(initial: float, maximum: float, factor: float = 1.6, jitter: bool = False) -> Any:
    """Pauses of initial, initial*factor, ... up to maximum seconds (a tenacity wait).

    With `jitter`, each pause is drawn at random below its bound, so that writers racing
    each other fall out of step."""
    from tenacity import wait_exponential, wait_random_exponential

    if jitter:
        return wait_random_exponential(multiplier=initial, exp_base=factor, max=maximum)
    return wait_exponential(multiplier=initial, exp_base=factor, min=initial, max=maximum)


def _stop(timeout: float, attempts: int | None = None) -> Any:
    from tenacity import stop_after_attempt, stop_before_delay, stop_never

    stop = stop_never if timeout == FOREVER else stop_before_delay(timeout)
    return stop if attempts is None else stop | stop_after_attempt(attempts)


def poll_until(
    check: Callable[[], tuple[T | None, str]],
    *,
    what: str,
    progress: Progress = noop,
    timeout: float = 3600.0,
    poll: float = 0.2,
    max_poll: float = 5.0,
    factor: float = 1.5,
    jitter: bool = False,
    attempts: int | None = None,
    timed_out: Callable[[str, float], BaseException] | None = None,
) -> T:
    """Call `check` with growing pauses until it returns a result; it reports the state.

    `check` returns (result, state): a non-None result ends the wait. It raises to fail.
    Out of time (or of `attempts`), `timed_out(state, elapsed)` is raised (default: a
    `CloudError`).
    """
    from tenacity import Retrying, retry_if_result

    start = time.monotonic()
    state = ""

    def attempt() -> T | None:
        nonlocal state
        result, state = check()
        if result is None:
            progress(state, time.monotonic() - start)
        return result

    def give_up(_: RetryCallState) -> None:
        elapsed = time.monotonic() - start
        if timed_out is not None:
            raise timed_out(state, elapsed)
        from tpuctl.errors import CloudError

        raise CloudError(f"timed out after {int(elapsed)}s waiting for {what} (state {state})")

    result: T | None = Retrying(
        retry=retry_if_result(lambda r: r is None),
        wait=backoff(poll, max_poll, factor, jitter),
        stop=_stop(timeout, attempts),
        retry_error_callback=give_up,
        reraise=True,
    )(attempt)
    assert result is not None  # give_up raised otherwise
    return result


def retrying(
    retry: Callable[[BaseException], bool],
    *,
    timeout: float = FOREVER,
    initial: float = 0.5,
    maximum: float = 5.0,
    factor: float = 1.6,
    before_sleep: Callable[[BaseException, float], None] | None = None,
) -> Retrying:
    """Try again while `retry(exception)` says so, with growing pauses, within `timeout`;
    the last exception is raised as it is. `before_sleep(exception, pause)` is told of
    every pause (to say why the wait goes on)."""
    from tenacity import Retrying, retry_if_exception

    return Retrying(
        retry=retry_if_exception(retry),
        wait=backoff(initial, maximum, factor),
        stop=_stop(timeout),
        before_sleep=_tell(before_sleep),
        reraise=True,
    )


def aretrying(
    retry: Callable[[BaseException], Awaitable[bool]],
    *,
    timeout: float = FOREVER,
    initial: float = 0.5,
    maximum: float = 5.0,
    factor: float = 1.6,
) -> AsyncRetrying:
    """`retrying` for coroutines; the predicate is a coroutine too (it may ask a thread)."""
    import asyncio  # here: importing it costs ~15 ms, which commands without coroutines skip

    from tenacity import AsyncRetrying

    async def predicate(state: RetryCallState) -> bool:
        exc = state.outcome.exception() if state.outcome else None
        return exc is not None and await retry(exc)

    return AsyncRetrying(
        retry=predicate,
        wait=backoff(initial, maximum, factor),
        stop=_stop(timeout),
        sleep=asyncio.sleep,
        reraise=True,
    )


def _tell(callback: Callable[[BaseException, float], None] | None) -> Any:
    if callback is None:
        return None

    def before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        if exc is not None:
            callback(exc, state.upcoming_sleep)

    return before_sleep
