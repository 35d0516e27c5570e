"""The signals that end a command, and the calls they must not cut in half.

A command that creates something (`create`, `create --queued`, `run`) treats SIGINT,
SIGTERM and SIGHUP alike: each raises KeyboardInterrupt, so the same cleanup runs
whether the user pressed Ctrl-C, a scheduler sent SIGTERM or the terminal went away.
When the command ends, the handlers it replaced are put back. A signal the process was
started to ignore (`nohup`, a background job of a non-interactive shell) stays ignored:
whoever started tpuctl asked for that.

A create call is not idempotent: cut in half, it may still take effect on the server
with nobody left to clean up. Inside `deferred()` a first signal waits until the call
has returned (its result is then known, and cleaned up), and a second one interrupts
at once.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
Handler = Callable[[int, FrameType | None], Any] | int | None

_depth = 0  # how many `deferred()` blocks the main thread is in
_pending: int | None = None  # a signal that arrived in one
received: list[int] = []  # every signal that arrived under `install` (cleared by `install`)


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    global _pending
    received.append(signum)
    if _depth and _pending is None:
        _pending = signum
        return
    raise KeyboardInterrupt


def as_ctrl_c(signum: int, _frame: FrameType | None) -> None:
    """The handler `like_ctrl_c` gives SIGTERM and SIGHUP: Python's SIGINT default."""
    raise KeyboardInterrupt


def like_ctrl_c() -> None:
    """For the program's whole life (`tpuctl.entry`): SIGTERM and SIGHUP raise
    KeyboardInterrupt, as SIGINT does, where Python's defaults are in place (not when
    started to ignore them). Commands put their own handlers over these and back."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is signal.SIG_DFL:
            signal.signal(sig, as_ctrl_c)


def install() -> dict[int, Handler]:
    """Make SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt; returns the handlers
    replaced, for `restore`. Nothing outside the main thread (Python allows none)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    replaced: dict[int, Handler] = {}
    received.clear()
    for sig in SIGNALS:
        if signal.getsignal(sig) is signal.SIG_IGN:
            continue
        replaced[sig] = signal.signal(sig, _interrupt)
    return replaced


def restore(replaced: dict[int, Handler]) -> None:
    """Put back the handlers `install` replaced."""
    for sig, handler in replaced.items():
        signal.signal(sig, signal.SIG_DFL if handler is None else handler)


@contextlib.contextmanager
def alike() -> Iterator[None]:
    """`install` for the block, `restore` after it."""
    replaced = install()
    try:
        yield
    finally:
        restore(replaced)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """A call that must not be cut in half: a first signal (under `install`) interrupts
    when the block has ended, a second one at once. An error leaving the block wins."""
    global _depth, _pending
    _depth += 1
    try:
        yield
    except BaseException:
        _depth -= 1
        if not _depth:
            _pending = None
        raise
    _depth -= 1
    if not _depth and _pending is not None:
        _pending = None
        raise KeyboardInterrupt
