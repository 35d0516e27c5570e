"""The runner's watch of a job's statuses, with the bucket and the node faked."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from tpuctl.errors import CloudError
from tpuctl.services.run import agents, watch


def _job(deadline: float) -> SimpleNamespace:
    return SimpleNamespace(
        job_id="20261130-000000-abcdef",
        spec=SimpleNamespace(heartbeat_deadline=deadline),
        beats=None,
        lost={},
    )


def test_statuses_unreadable_past_the_heartbeat_deadline_end_the_watch(monkeypatch) -> None:
    """A bucket the client cannot read says nothing of the agents for a while; past the
    heartbeat deadline no heartbeat has been seen, and the run must not wait forever."""
    reads = []

    def unreadable(job: object) -> dict:
        reads.append(job)
        raise CloudError("HTTP 503: the bucket is unreachable")

    monkeypatch.setattr(agents, "statuses", unreadable)
    monkeypatch.setattr(agents, "STATUS_POLL", 0.01)
    monkeypatch.setattr(watch, "node_lost", lambda job: None)
    with pytest.raises(CloudError, match=r"cannot read the status of job .* for 0s .*unreachable"):
        asyncio.run(watch._poll(_job(0.2), 1))
    assert len(reads) > 1  # it did try again before giving up


def test_a_status_read_again_in_time_keeps_the_watch_going(monkeypatch) -> None:
    answers = iter([CloudError("HTTP 503")] * 3 + [{0: {"state": "SUCCEEDED", "heartbeat": 1}}])

    def flaky(job: object) -> dict:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(agents, "statuses", flaky)
    monkeypatch.setattr(agents, "STATUS_POLL", 0.01)
    monkeypatch.setattr(watch, "node_lost", lambda job: None)
    final, lost = asyncio.run(watch._poll(_job(30.0), 1))
    assert (final[0]["state"], lost) == ("SUCCEEDED", None)


def _node_gone_after(monkeypatch, answers: list[dict]) -> tuple[dict, str | None]:  # noqa: ANN001
    """_poll with the node gone and the statuses read as `answers`, one per read."""
    reads = iter(answers)
    monkeypatch.setattr(agents, "statuses", lambda job: next(reads))
    monkeypatch.setattr(agents, "STATUS_POLL", 0.01)
    monkeypatch.setattr(watch, "node_lost", lambda job: "DELETED")
    return asyncio.run(watch._poll(_job(30.0), 1))


def test_a_node_deleted_by_the_agent_that_just_ended_the_job_is_not_a_loss(monkeypatch) -> None:
    """Worker 0 writes SUCCEEDED, then deletes the node (--teardown): a watch that read
    RUNNING just before, then finds the node gone, must end with the job's outcome, not
    with "the node was DELETED" (exit 1 for a job that succeeded)."""
    running = {0: {"state": "RUNNING", "heartbeat": 1}}
    done = {0: {"state": "SUCCEEDED", "heartbeat": 2, "exit_status": 0}}
    final, lost = _node_gone_after(monkeypatch, [running, running, done])
    assert (final[0]["state"], lost) == ("SUCCEEDED", None)


def test_a_node_gone_under_running_agents_is_a_loss(monkeypatch) -> None:
    running = {0: {"state": "RUNNING", "heartbeat": 1}}
    assert _node_gone_after(monkeypatch, [running] * 3) == ({}, "DELETED")


def test_the_end_of_run_summary_stays_one_readable_line_on_many_workers() -> None:
    from tpuctl.services.run.spec import states_summary

    assert states_summary({0: "SUCCEEDED", 1: "FAILED"}, 2, 1) == "w0 SUCCEEDED, w1 FAILED"
    many = dict.fromkeys(range(256), "SUCCEEDED") | {255: "LOST", 7: "FAILED"}
    assert states_summary(many, 256, 1) == (
        "w0-w6 SUCCEEDED, w7 FAILED, w8-w254 SUCCEEDED, w255 LOST"
    )
    two = dict.fromkeys(range(8), "SUCCEEDED") | {5: "FAILED"}
    assert states_summary(two, 8, 2) == (
        "s0/w0-w3 SUCCEEDED, s1/w0 SUCCEEDED, s1/w1 FAILED, s1/w2 SUCCEEDED, s1/w3 SUCCEEDED"
    )


def test_a_follower_whose_cancel_comes_out_as_a_connection_error_ends_with_the_watch(
    monkeypatch,
) -> None:
    """The watch ends while a follower reconnects to a worker whose VM is gone. Its cancel
    can come out of the connection attempt as a connection error (Python 3.11's
    `asyncio.wait_for` race): the follower must not take it for one more drop to retry,
    or the watch waits for it for ever (a multislice run hung after a preemption)."""
    import contextlib

    from tpuctl.errors import Unreachable

    connecting = asyncio.Event()

    @contextlib.asynccontextmanager
    async def session(*_args: object):  # noqa: ANN202
        connecting.set()
        try:
            await asyncio.sleep(3600)  # a VM that is gone: no answer
        except asyncio.CancelledError:
            raise Unreachable("worker 1 (10.0.0.2:22): timed out") from None
        yield

    async def poll(job: object, workers: int) -> tuple[dict, None]:
        await connecting.wait()  # the job ends while the follower connects
        return {0: {"state": "SUCCEEDED"}, 1: {"state": "SUCCEEDED"}}, None

    monkeypatch.setattr(watch, "_poll", poll)
    ep = SimpleNamespace(worker=1, host="10.0.0.2", port=22)
    job = SimpleNamespace(
        plan=SimpleNamespace(endpoints=[ep], user="u", key="k", known_hosts="h"),
        logs={1: "/home/u/log"},
        pids={1: 42},
        adapters=SimpleNamespace(ssh=SimpleNamespace(session=session)),
        ui=SimpleNamespace(log=lambda worker, data: None),
    )

    import threading

    ended: list[tuple[dict, str | None]] = []
    thread = threading.Thread(
        target=lambda: ended.append(asyncio.run(watch._watch(job, 2, {1: 0}))), daemon=True
    )
    thread.start()
    thread.join(60)  # a hang guard, not a timing: the follower retried for ever before
    assert ended, "the watch did not end: its follower took the cancel for a drop"
    final, lost = ended[0]
    assert lost is None and final[1]["state"] == "SUCCEEDED"
