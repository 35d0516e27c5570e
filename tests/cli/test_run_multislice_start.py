"""The agents of a multislice job start when their slice answers SSH, not all at once: worker
0 (of slice 0) waits for a peer whose agent has not started yet as long as the client may
still be starting it, not for the heartbeat deadline of an agent that runs."""

from __future__ import annotations

import time

import pytest

from tests.cli.test_run import project
from tpuctl.cloud.ssh import SshApi
from tpuctl.errors import Unreachable
from tpuctl.services.run import agents

__all__ = ["project"]  # the fixture, shared

# one worker per slice: worker 1 is slice 1's; on Compute Engine, and on the Cloud TPU API
SHAPES = {
    "compute": ("-a", "tpu7x-8", "--zone", "us-central1-c"),
    "tpu": ("-a", "v5litepod-8", "--zone", "us-central1-a"),
}
DEADLINE = 4.0  # --heartbeat-deadline: two heartbeats of a running agent
LATE = 2.5 * DEADLINE  # slice 1 answers SSH this much later than slice 0


@pytest.mark.long
@pytest.mark.parametrize("api", sorted(SHAPES))
def test_a_slice_whose_agent_starts_later_than_the_heartbeat_deadline_is_waited_for(
    cli, emulator, project, monkeypatch, api
) -> None:
    """Slice 1's VM refuses SSH (still booting) for LATE seconds after slice 0's agent
    started; the client keeps trying (for BOOT_WAIT), and worker 0 must not call the
    peer it has never seen lost before then."""
    connect = SshApi._connect
    opens: list[float] = []

    async def booting(self, ep, where, *rest):  # noqa: ANN001, ANN002, ANN202
        if ep.worker == 1:  # slice 1's only worker
            opens[:] = opens or [time.monotonic() + LATE]
            if time.monotonic() < opens[0]:
                raise Unreachable(f"{where}: connection refused")
        return await connect(self, ep, where, *rest)

    monkeypatch.setattr(SshApi, "_connect", booting)
    nap = f"NAP={LATE:g}"  # worker 0's script runs on past the late start
    r = cli("run", str(project / "job.py"), *SHAPES[api], "--slices", "2", "--no-outputs",
            "--heartbeat-deadline", f"{DEADLINE:g}s", "--env", nap)  # fmt: skip
    assert r.code == 0, r.err
    assert "s0/w0 SUCCEEDED, s1/w0 SUCCEEDED" in r.err, r.err
    assert "LOST" not in r.err and "no heartbeat" not in r.err
    assert opens and time.monotonic() > opens[0]  # slice 1 did answer late
    assert agents.START_WAIT >= agents.BOOT_WAIT + agents.START_TIMEOUT
    assert emulator.instances() == []
