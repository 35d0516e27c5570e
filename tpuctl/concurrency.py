"""`each`: a function over many items, a few at a time, in threads a Ctrl-C never waits for;
`run_async`: `asyncio.run` for code a Ctrl-C may interrupt anywhere.

Daemon threads, not a ThreadPoolExecutor: the interpreter waits for an executor's
threads when it exits, and `with ThreadPoolExecutor()` waits for every task when it is
left, so a Ctrl-C during a list of slow calls (a status read being retried, a delete
waited on for minutes) would be held until they all end. Here a KeyboardInterrupt in the
caller's wait leaves at once; the threads it leaves behind end with the process.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def each(fn: Callable[[T], R], items: list[T], parallel: int) -> list[R]:
    """`fn` of every item, `parallel` at a time, in the items' order; the first error
    raised by `fn` is raised once every started call has ended."""
    if len(items) <= 1 or parallel <= 1:
        return [fn(item) for item in items]
    results: list[Any] = [None] * len(items)
    errors: list[BaseException] = []
    todo = iter(list(enumerate(items)))
    lock = threading.Lock()

    def work() -> None:
        while not errors:
            with lock:
                i, item = next(todo, (-1, None))
            if i < 0:
                return
            try:
                results[i] = fn(item)  # type: ignore[arg-type]
            except BaseException as e:  # noqa: BLE001 - raised by the caller
                errors.append(e)

    threads = [threading.Thread(target=work, daemon=True) for _ in range(min(parallel, len(items)))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()  # a KeyboardInterrupt here leaves at once
    if errors:
        raise errors[0]
    return results


def run_async(main: Coroutine[Any, Any, R]) -> R:
    """`asyncio.run(main)`, where a Ctrl-C (or SIGTERM, SIGHUP under `interrupts.install`)
    that lands inside one of its tasks is the caller's interruption alone. The signal's
    KeyboardInterrupt leaves `run_async` as it leaves `asyncio.run`; the task it was raised
    in keeps a copy of it, which asyncio would otherwise print when the task is collected
    ("Task exception was never retrieved" and a traceback, after tpuctl said what it did)."""

    async def quietly() -> R:
        asyncio.get_running_loop().set_exception_handler(_quiet_interruptions)
        return await main

    return asyncio.run(quietly())


def _quiet_interruptions(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    if isinstance(context.get("exception"), (KeyboardInterrupt, asyncio.CancelledError)):
        return  # an interruption, which the caller has handled
    loop.default_exception_handler(context)
