"""A Ctrl-C that lands inside a task of tpuctl's event loop is the command's interruption
alone: nothing is printed for the task afterwards (`concurrency.run_async`)."""

from __future__ import annotations

import asyncio
import gc
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from tpuctl.concurrency import run_async


async def _interrupted_in_a_task() -> None:
    """What a signal handler raising KeyboardInterrupt does when the signal arrives while
    one of the loop's tasks runs (there: a thread starting inside asyncssh's connect)."""

    async def worker() -> None:
        await asyncio.sleep(0)
        raise KeyboardInterrupt

    await asyncio.gather(worker(), asyncio.sleep(10))


def _said_after(runner: Callable[[Any], Any], caplog: pytest.LogCaptureFixture) -> str:
    """What asyncio logs (on stderr, outside pytest) once the interrupted run is over."""
    caplog.clear()
    with pytest.raises(KeyboardInterrupt):
        runner(_interrupted_in_a_task())
    gc.collect()  # the task that kept the interruption is collected: asyncio may report it
    return caplog.text


def test_asyncio_alone_prints_the_tasks_copy_of_the_interruption(caplog) -> None:  # noqa: ANN001
    # the failure run_async exists for: a traceback after tpuctl said what it did
    said = _said_after(asyncio.run, caplog)
    assert "Task exception was never retrieved" in said and "KeyboardInterrupt" in said


def test_run_async_leaves_the_interruption_to_the_caller(caplog) -> None:  # noqa: ANN001
    assert _said_after(run_async, caplog) == ""


def test_run_async_still_reports_a_real_error_of_a_forgotten_task(caplog) -> None:  # noqa: ANN001
    async def main() -> None:
        async def broken() -> None:
            raise ValueError("lost")

        asyncio.ensure_future(broken())
        await asyncio.sleep(0.01)

    caplog.clear()
    run_async(main())
    gc.collect()
    said = caplog.text
    assert "Task exception was never retrieved" in said and "ValueError: lost" in said


async def _interrupted_twice(closed: list[str]) -> None:
    """A first Ctrl-C in the main task, a second while the tasks it leaves are being
    cancelled (`run`'s double Ctrl-C while SSH sessions start), landing in one of them
    while another still needs the loop to close its connection."""

    async def session() -> None:
        try:
            await asyncio.sleep(10)
        finally:
            await asyncio.sleep(0.01)  # as an SSH connection's close is awaited
            closed.append("closed")

    async def elsewhere() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            raise KeyboardInterrupt from None  # the second signal lands in this task

    for work in (session(), elsewhere()):
        asyncio.ensure_future(work)
    await asyncio.sleep(0)
    raise KeyboardInterrupt


def _said_after_twice(runner: Callable[[Any], Any], caplog: pytest.LogCaptureFixture) -> list[str]:
    caplog.clear()
    closed: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # what asyncio alone leaves: an unraisable error
        with pytest.raises(KeyboardInterrupt):
            runner(_interrupted_twice(closed))
        gc.collect()
    return [*closed, *caplog.messages]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # its leftovers
def test_asyncio_alone_leaves_tasks_half_cancelled_on_a_second_interruption(caplog) -> None:  # noqa: ANN001
    said = _said_after_twice(asyncio.run, caplog)
    assert "closed" not in said, said  # the loop was closed under the session
    assert any("never retrieved" in m or "destroyed but it is pending" in m for m in said), said


def test_run_async_ends_every_task_before_a_second_interruption_leaves(caplog) -> None:  # noqa: ANN001
    assert _said_after_twice(run_async, caplog) == ["closed"]
