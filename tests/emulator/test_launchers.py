"""The launchers that start a session's command on a worker report its pid (whose process
group the emulator signals) and its true wait status: 128 + N is not a death by signal N."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tpuctl.emulator.workers.sessions import LAUNCHER, LAUNCHER_PL, PERL

LAUNCHERS = {
    "launcher.py": [sys.executable, "-I", "-S", LAUNCHER],
    "launcher.pl": [PERL or "perl", LAUNCHER_PL],
}


def _launch(which: str, command: str) -> tuple[list[int], str]:
    """(the report's numbers, stdout) of `sh -c command` run through a launcher."""
    read, write = os.pipe()
    with os.fdopen(read, "rb") as report:
        done = subprocess.run(
            [*LAUNCHERS[which], str(write), "0", "sh", "-c", command],
            pass_fds=(write,),
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            start_new_session=True,
        )
        os.close(write)
        numbers = [int(line) for line in report.read().split()]
    assert done.returncode == 0, done.stderr
    return numbers, done.stdout


@pytest.mark.parametrize("which", sorted(LAUNCHERS))
def test_a_launcher_reports_the_group_and_the_true_status(which: str) -> None:
    if which == "launcher.pl" and PERL is None:
        pytest.fail("no /usr/bin/perl: perl-base is essential on Debian")
    (pid, status), out = _launch(which, "echo $$ $(ps -o pgid= -p $$); exit 130")
    _, group = map(int, out.split())
    assert group == pid  # the emulator signals this group, and it holds the command
    assert os.waitstatus_to_exitcode(status) == 130
    (pid, status), _ = _launch(which, "kill -TERM $$")
    assert os.waitstatus_to_exitcode(status) == -signal.SIGTERM
    # a signal to the group reaches the command, not the launcher, which reports it
    (pid, status), _ = _launch(which, "kill -INT 0; exit 3")
    assert os.waitstatus_to_exitcode(status) == -signal.SIGINT
