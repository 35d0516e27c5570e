"""A Ctrl-C that lands inside a task of tpuctl's event loop is the command's interruption
alone: nothing is printed for the task afterwards (`concurrency.run_async`)."""

from __future__ import annotations

import asyncio
import gc
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
