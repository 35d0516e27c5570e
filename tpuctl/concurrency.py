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
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")
WIND_DOWN = 3.0  # seconds the tasks left by an interruption have to end (connections close)
_ABANDONED: list[asyncio.Task[Any]] = []  # tasks whose clean-up hung: never collected


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
    may land anywhere, also twice, and is the caller's interruption alone: its
    KeyboardInterrupt leaves `run_async` as it leaves `asyncio.run`, and nothing is
    printed for the event loop's tasks afterwards.

    - The task a signal's KeyboardInterrupt was raised in keeps a copy of it, which
      asyncio would print when the task is collected ("Task exception was never
      retrieved" and a traceback, after tpuctl said what it did): not printed here.
    - After the first interruption every task left is cancelled and run to its end (its
      `finally`: SSH connections closed) before the loop is closed. A second signal
      during that (`asyncio.run` stops there, closes the loop under tasks half cancelled,
      and their collection prints "Task was destroyed but it is pending!" or "Event loop
      is closed") is raised once they have ended, at most WIND_DOWN seconds later."""
    loop = asyncio.new_event_loop()
    loop.set_exception_handler(_quiet_interruptions)
    asyncio.set_event_loop(loop)
    try:
        result = loop.run_until_complete(main)
    except BaseException:
        _wind_down(loop)  # a signal meanwhile: one is being raised already
        raise
    if _wind_down(loop):
        raise KeyboardInterrupt
    return result


def _wind_down(loop: asyncio.AbstractEventLoop) -> bool:
    """Cancel the tasks left and run them to their end (for WIND_DOWN seconds at most),
    then close the loop; True when a signal's KeyboardInterrupt came meanwhile."""
    interrupted = False
    deadline = time.monotonic() + WIND_DOWN
    pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in pending:
        task.cancel()
    ended = asyncio.gather(*pending, return_exceptions=True) if pending else None
    while ended is not None and not ended.done() and time.monotonic() < deadline:
        stop = loop.call_later(max(0.0, deadline - time.monotonic()), loop.stop)
        try:
            loop.run_until_complete(ended)
        except KeyboardInterrupt:
            interrupted = True
        except RuntimeError:  # stopped at the deadline
            pass
        finally:
            stop.cancel()
    asyncio.set_event_loop(None)
    left = [task for task in pending if not task.done()]
    if left:
        # A clean-up that hangs: left as it is, the loop open (closing it under them
        # would make their clean-up fail, loudly, when they are collected).
        _ABANDONED.extend(left)
        return interrupted
    try:
        loop.run_until_complete(loop.shutdown_asyncgens())
    except KeyboardInterrupt:
        interrupted = True
    loop.close()
    return interrupted


def _quiet_interruptions(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    if isinstance(context.get("exception"), (KeyboardInterrupt, asyncio.CancelledError)):
        return  # an interruption, which the caller has handled
    loop.default_exception_handler(context)
