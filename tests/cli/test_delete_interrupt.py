"""A signal while `delete` waits leaves at once, saying the cloud goes on deleting."""

from __future__ import annotations

import signal

import pytest

from tests.cli.conftest import spawned

ZONE = "us-central1-a"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_delete_is_waited_on_leaves_at_once(cli, emulator, sig) -> None:
    assert cli("create", "slow-going", "-a", "v3-8", "--zone", ZONE).code == 0
    emulator.durations(delete=None)  # the cloud takes its time: held until advanced
    with spawned("delete", "slow-going", "--zone", ZONE, "--yes") as run:
        run.wait_for("deleting:")  # the progress line: the delete is being waited on
        run.proc.send_signal(sig)
    # ended by the signal (the cloud holds the delete for ever: a wait for it would not end)
    assert run.proc.returncode == 130, run.err
    assert "the cloud goes on deleting slow-going" in run.err
    assert f"`tpuctl list --zone {ZONE}` shows what is left" in run.err
    assert "Traceback" not in run.err
    (node,) = emulator.nodes()
    assert node["state"] == "DELETING"  # asked, and going on in the cloud
    emulator.advance()
    assert emulator.nodes() == []
