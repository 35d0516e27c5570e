"""The job protocol (tpuctl/agent/protocol.py): one module, the laptop's and the agent's."""

from __future__ import annotations

from tpuctl.agent import protocol
from tpuctl.services import staging


def test_layout_agrees_with_staging() -> None:
    assert (protocol.BLOBS, protocol.JOBS) == (staging.BLOBS, staging.JOBS)
    assert protocol.job_path("j", "job.json") == staging.job_record_path("j")
