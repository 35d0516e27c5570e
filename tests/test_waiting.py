"""waiting.py: the one way tpuctl waits and retries."""

from __future__ import annotations

import asyncio
import time

import pytest

from tpuctl.errors import CloudError, ConnectionDropped, HostKeyMismatch, WaitTimedOut
from tpuctl.waiting import aretrying, poll_until, retrying


def test_poll_until_reports_each_state_and_returns_the_answer() -> None:
    answers = iter([(None, "CREATING"), (None, "CREATING"), ("node", "READY")])
    seen: list[str] = []
    result = poll_until(
        lambda: next(answers), what="n", progress=lambda s, _: seen.append(s), poll=0.001
    )
    assert result == "node"
    assert seen == ["CREATING", "CREATING"]  # the answer itself is not a wait


def test_poll_until_gives_up_before_a_pause_would_pass_the_deadline() -> None:
    calls = 0

    def check() -> tuple[None, str]:
        nonlocal calls
        calls += 1
        return None, "PENDING"

    start = time.monotonic()
    with pytest.raises(CloudError, match=r"waiting for the thing \(state PENDING\)"):
        poll_until(check, what="the thing", timeout=0.05, poll=0.04, factor=1.0)
    assert calls == 2  # at 0 and 0.04 s; a third pause would end past 0.05 s
    assert time.monotonic() - start < 0.5


def test_poll_until_raises_what_the_caller_names_and_counts_attempts() -> None:
    with pytest.raises(WaitTimedOut, match="still PENDING after 3 tries"):
        poll_until(
            lambda: (None, "PENDING"),
            what="x",
            poll=0.001,
            attempts=3,
            timed_out=lambda state, _: WaitTimedOut(f"still {state} after 3 tries"),
        )


def test_poll_until_lets_a_failure_of_the_check_through() -> None:
    def check() -> tuple[None, str]:
        raise CloudError("node went to PREEMPTED")

    with pytest.raises(CloudError, match="PREEMPTED"):
        poll_until(check, what="x")


def test_retrying_retries_only_what_the_predicate_allows() -> None:
    failures = [ConnectionDropped("drop"), ConnectionDropped("drop")]
    told: list[float] = []

    def flaky() -> str:
        if failures:
            raise failures.pop()
        return "done"

    for attempt in retrying(
        lambda e: isinstance(e, ConnectionDropped),
        initial=0.001,
        before_sleep=lambda e, pause: told.append(pause),
    ):
        with attempt:
            result = flaky()
    assert result == "done" and len(told) == 2

    with pytest.raises(HostKeyMismatch):
        for attempt in retrying(lambda e: isinstance(e, ConnectionDropped), initial=0.001):
            with attempt:
                raise HostKeyMismatch("never retried")


def test_aretrying_asks_its_async_predicate_and_stops_at_the_deadline() -> None:
    asked: list[str] = []

    async def again(e: BaseException) -> bool:
        asked.append(str(e))
        return True

    async def never() -> None:
        raise ConnectionDropped("dropped")

    async def main() -> None:
        await aretrying(again, timeout=0.05, initial=0.02, factor=1.0)(never)

    with pytest.raises(ConnectionDropped):
        asyncio.run(main())
    assert 2 <= len(asked) <= 4
