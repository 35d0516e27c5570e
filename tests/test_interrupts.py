"""SIGINT, SIGTERM and SIGHUP alike; calls not cut in half; handlers put back."""

from __future__ import annotations

import signal

import pytest

from tpuctl import interrupts

# the signals raised below reach handlers of tpuctl's, as in a terminal, not under nohup
pytestmark = pytest.mark.usefixtures("python_signal_defaults")


def handlers() -> list[object]:
    return [signal.getsignal(sig) for sig in interrupts.SIGNALS]


@pytest.mark.parametrize("sig", interrupts.SIGNALS)
def test_each_signal_interrupts_as_ctrl_c_does(sig: int) -> None:
    before = handlers()
    with pytest.raises(KeyboardInterrupt), interrupts.alike():
        signal.raise_signal(sig)
    assert handlers() == before


def test_a_signal_during_a_deferred_call_interrupts_once_it_returned() -> None:
    returned = []
    with interrupts.alike():
        with pytest.raises(KeyboardInterrupt), interrupts.deferred():
            signal.raise_signal(signal.SIGTERM)
            returned.append("the call's answer")
        with interrupts.deferred():  # nothing pending any more
            returned.append("the next call")
    assert returned == ["the call's answer", "the next call"]


def test_a_second_signal_interrupts_at_once() -> None:
    reached = []
    with pytest.raises(KeyboardInterrupt), interrupts.alike(), interrupts.deferred():
        signal.raise_signal(signal.SIGHUP)
        reached.append("after the first")
        signal.raise_signal(signal.SIGINT)
        reached.append("after the second")
    assert reached == ["after the first"]


def test_an_error_leaving_a_deferred_call_wins() -> None:
    with interrupts.alike():
        with pytest.raises(ValueError), interrupts.deferred():
            signal.raise_signal(signal.SIGTERM)
            raise ValueError("the call failed")
        with interrupts.deferred():
            pass  # the signal went with the error: nothing pending


def test_an_ignored_signal_stays_ignored_and_every_handler_comes_back() -> None:
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup
    try:
        before = handlers()
        with interrupts.alike():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) is not before[1]
            signal.raise_signal(signal.SIGHUP)  # ignored: nothing happens
        assert handlers() == before
    finally:
        signal.signal(signal.SIGHUP, previous)


def test_a_command_notes_a_signal_and_leaves_a_handler_of_someone_elses() -> None:
    seen: list[int] = []
    others = signal.signal(signal.SIGHUP, lambda signum, _frame: seen.append(signum))
    try:
        before = handlers()
        with pytest.raises(KeyboardInterrupt), interrupts.noting():
            signal.raise_signal(signal.SIGHUP)  # the embedding program's: only its handler
            assert seen == [signal.SIGHUP]
            assert interrupts.received == []
            signal.raise_signal(signal.SIGTERM)
        assert interrupts.received == [signal.SIGTERM]
        assert handlers() == before
    finally:
        signal.signal(signal.SIGHUP, others)


def test_once_quiet_no_signal_interrupts() -> None:
    before = handlers()
    try:
        interrupts.quiet()
        for sig in interrupts.SIGNALS:
            signal.raise_signal(sig)  # ignored: nothing happens
        assert handlers() == [signal.SIG_IGN] * 3
    finally:
        for sig, handler in zip(interrupts.SIGNALS, before, strict=True):
            signal.signal(sig, handler)
