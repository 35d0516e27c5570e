"""Every signal disposition tpuctl sets, in one place: how SIGINT, SIGTERM and SIGHUP end
the program, a command, and a command that cleans up, and the calls they must not cut
in half.

- For the program's life (`like_ctrl_c`, from `tpuctl.entry`): SIGTERM and SIGHUP raise
  KeyboardInterrupt as SIGINT does, so a signal during the imports ends it with one line.
- For a command's life (`noting`, from `tpuctl.cli.main`): the three are noted in
  `received` and raise KeyboardInterrupt, which ends the command with "interrupted".
- A command that creates something (`create`, `create --queued`, `run`; `install` or
  `alike`) gets the same handler over whatever was there, so the same cleanup runs
  whether the user pressed Ctrl-C, a scheduler sent SIGTERM or the terminal went away;
  when it ends, the handlers it replaced are put back.
- Once tpuctl is ending (`quiet`), all three are ignored: a second Ctrl-C while it says
  what it left behind must not cut that short.

A signal the process was started to ignore (`nohup`, a background job of a
non-interactive shell) stays ignored throughout: whoever started tpuctl asked for that.

A create call is not idempotent: cut in half, it may still take effect on the server
with nobody left to clean up. Inside `deferred()` a first signal waits until the call
has returned (its result is then known, and cleaned up), and a second one interrupts
at once.

This module imports nothing heavy: `tpuctl.entry` installs its handlers first of all.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

TYPE_CHECKING = False  # `typing` costs 3 ms of `tpuctl --help`, which imports this module
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType
    from typing import Any, TypeAlias

    Handler: TypeAlias = Callable[[int, FrameType | None], Any] | int | None

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_depth = 0  # how many `deferred()` blocks the main thread is in
_pending: int | None = None  # a signal that arrived in one
received: list[int] = []  # every signal that arrived under `noting` or `install` (cleared by both)


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


_DEFAULTS = (signal.default_int_handler, signal.SIG_DFL, as_ctrl_c)


@contextlib.contextmanager
def noting() -> Iterator[None]:
    """While a command runs: SIGINT, SIGTERM and SIGHUP, where Python's defaults (or
    `like_ctrl_c`'s) are in place, are noted in `received` and raise KeyboardInterrupt.
    A handler someone else set (a program that embeds tpuctl, a test) is left alone."""
    received.clear()
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    replaced: dict[int, Handler] = {
        sig: signal.signal(sig, _interrupt) for sig in SIGNALS if signal.getsignal(sig) in _DEFAULTS
    }
    try:
        yield
    finally:
        restore(replaced)


def quiet() -> None:
    """Ignore SIGINT, SIGTERM and SIGHUP from now on: the program is ending. Raises the
    KeyboardInterrupt of a signal that came just before, as any call may."""
    for sig in SIGNALS:
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, signal.SIG_IGN)


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
