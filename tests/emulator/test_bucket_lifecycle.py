"""Buckets' lifecycle rules and metageneration, which fake-gcs-server does not keep: the
emulator's storage proxy keeps them, checks them as Cloud Storage does, and applies the
Delete rules when the control plane says (storage/lifecycle.py)."""

from __future__ import annotations

import datetime
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from google.api_core import exceptions as gx

from tests.conftest import Emulator
from tpuctl.emulator.control.client import EmulatorControl
from tpuctl.emulator.core.server import EmulatorServer
from tpuctl.emulator.storage import lifecycle as bucket_lifecycle

JOBS_RULE = {"action": {"type": "Delete"}, "condition": {"age": 30, "matchesPrefix": ["jobs/"]}}


def _bucket(emulator: Emulator, name: str = "lc") -> Any:
    return emulator.storage_client().create_bucket(name, location="us-central1")


def _patch(emulator: Emulator, bucket: str, body: dict[str, Any], **query: str) -> tuple[int, Any]:
    """A raw PATCH of the JSON API, as any client may send it."""
    url = f"{emulator.status()['storage_endpoint']}/storage/v1/b/{bucket}"
    if query:
        url += "?" + "&".join(f"{k}={v}" for k, v in query.items())
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="PATCH",
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_a_rule_set_through_the_client_is_kept_and_shown(emulator: Emulator) -> None:
    bucket = _bucket(emulator)
    assert list(bucket.lifecycle_rules) == []
    bucket.add_lifecycle_delete_rule(age=30, matches_prefix=["jobs/"])
    bucket.patch()
    client = emulator.storage_client()
    assert [dict(r) for r in client.get_bucket("lc").lifecycle_rules] == [JOBS_RULE]
    listed = {b.name: [dict(r) for r in b.lifecycle_rules] for b in client.list_buckets()}
    assert listed == {"lc": [JOBS_RULE]}
    assert emulator.requests()["PATCH storage.buckets.patch"] == 1
    # a patch of another field leaves the rules alone; clearing them removes them
    again = client.get_bucket("lc")
    again.labels = {"team": "ml"}
    again.patch()
    assert [dict(r) for r in client.get_bucket("lc").lifecycle_rules] == [JOBS_RULE]
    again.clear_lifecycle_rules()
    again.patch()
    assert "lifecycle" not in client.get_bucket("lc")._properties


def test_rules_given_at_creation_are_kept_and_go_with_the_bucket(emulator: Emulator) -> None:
    client = emulator.storage_client()
    made = client.bucket("lc")
    made.add_lifecycle_delete_rule(age=3)
    client.create_bucket(made, location="us-central1")
    assert [dict(r) for r in client.get_bucket("lc").lifecycle_rules] == [
        {"action": {"type": "Delete"}, "condition": {"age": 3}}
    ]
    client.get_bucket("lc").delete()
    client.create_bucket("lc", location="us-central1")  # the same name: a new bucket
    assert list(client.get_bucket("lc").lifecycle_rules) == []


@pytest.mark.parametrize(
    "rule",
    [
        {"action": {"type": "Archive"}, "condition": {"age": 1}},
        {"action": {"type": "Delete"}, "condition": {}},
        {"action": {"type": "Delete"}},
        {"action": {"type": "SetStorageClass"}, "condition": {"age": 1}},
        {"action": {"type": "Delete"}, "condition": {"age": -1}},
        {"action": {"type": "Delete"}, "condition": {"age": "soon"}},
        {"action": {"type": "Delete"}, "condition": {"matchesPrefix": "jobs/"}},
        {"action": {"type": "Delete"}, "condition": {"createdBefore": "yesterday"}},
        {"action": {"type": "Delete"}, "condition": {"olderThan": 1}},
    ],
)
def test_a_bad_rule_is_refused_as_cloud_storage_refuses_it(emulator: Emulator, rule) -> None:
    _bucket(emulator)
    status, body = _patch(emulator, "lc", {"lifecycle": {"rule": [rule]}})
    assert status == 400
    assert body == bucket_lifecycle.invalid_body()
    assert body["error"]["message"] == "Invalid argument."
    assert list(emulator.storage_client().get_bucket("lc").lifecycle_rules) == []


def test_more_than_100_rules_are_refused(emulator: Emulator) -> None:
    _bucket(emulator)
    rules = [{"action": {"type": "Delete"}, "condition": {"age": n}} for n in range(101)]
    assert _patch(emulator, "lc", {"lifecycle": {"rule": rules}})[0] == 400
    assert _patch(emulator, "lc", {"lifecycle": {"rule": rules[:100]}})[0] == 200


def test_the_metageneration_counts_updates_and_guards_them(emulator: Emulator) -> None:
    bucket = _bucket(emulator)
    assert bucket.metageneration == 1
    bucket.labels = {"a": "b"}
    bucket.patch(if_metageneration_match=1)
    assert bucket.metageneration == 2
    stale = emulator.storage_client().bucket("lc")
    stale.add_lifecycle_delete_rule(age=1)
    with pytest.raises(gx.PreconditionFailed, match="pre-conditions you specified did not hold"):
        stale.patch(if_metageneration_match=1)
    assert list(emulator.storage_client().get_bucket("lc").lifecycle_rules) == []
    status, body = _patch(emulator, "lc", {"labels": {"c": "d"}}, ifMetagenerationNotMatch="2")
    assert status == 412 and body["error"]["errors"][0]["reason"] == "conditionNotMet"
    assert emulator.storage_client().get_bucket("lc").metageneration == 2


def test_delete_rules_apply_when_the_control_plane_says(emulator: Emulator) -> None:
    bucket = _bucket(emulator)
    bucket.lifecycle_rules = [
        JOBS_RULE,
        {"action": {"type": "Delete"}, "condition": {"age": 1, "matchesSuffix": [".tmp"]}},
        # a condition the emulator does not model never fires
        {"action": {"type": "Delete"}, "condition": {"age": 0, "numNewerVersions": 1}},
    ]
    bucket.patch()
    for name in ("jobs/a/job.json", "jobs/b/logs/w0.log", "blobs/abc", "x.tmp", "keep.txt"):
        bucket.blob(name).upload_from_string(b"x")
    assert emulator.run_lifecycle(0)["deleted"] == {"lc": []}
    out = emulator.run_lifecycle(2)
    assert out["deleted"] == {"lc": ["x.tmp"]}
    at = datetime.datetime.fromisoformat(out["at"].replace("Z", "+00:00"))
    assert at - datetime.datetime.now(datetime.timezone.utc) > datetime.timedelta(days=1.9)
    assert emulator.run_lifecycle(29.9)["deleted"] == {"lc": []}  # not 30 days old yet
    assert sorted(emulator.run_lifecycle(30)["deleted"]["lc"]) == [
        "jobs/a/job.json",
        "jobs/b/logs/w0.log",
    ]
    left = sorted(b.name for b in emulator.storage_client().list_blobs("lc"))
    assert left == ["blobs/abc", "keep.txt"]


@pytest.mark.parametrize("days", [-1, "soon", True])
def test_the_control_call_checks_its_days(emulator: Emulator, days) -> None:
    with pytest.raises(Exception, match="days must be a number >= 0"):
        emulator.call("POST", "storage/lifecycle", {"days": days})


def test_a_caller_denied_a_storage_permission_is_refused(emulator: Emulator) -> None:
    _bucket(emulator)
    emulator.config(denied_permissions=["storage.buckets.update"])
    status, body = _patch(emulator, "lc", {"lifecycle": {"rule": [JOBS_RULE]}})
    assert status == 403
    assert body["error"]["message"] == (
        "you@example.com does not have storage.buckets.update access to the Google Cloud "
        "Storage bucket. Permission 'storage.buckets.update' denied on resource (or it may "
        "not exist)."
    )
    assert emulator.storage_client().lookup_bucket("lc") is not None  # a read is allowed


def test_rules_and_metageneration_outlive_a_restart(tmp_path: Path) -> None:
    server = EmulatorServer(host="127.0.0.1", port=0, state_dir=tmp_path / "emu").start()
    try:
        control = Emulator(server.address)
        bucket = _bucket(control)
        bucket.add_lifecycle_delete_rule(age=30, matches_prefix=["jobs/"])
        bucket.patch()
    finally:
        server.stop()
    server = EmulatorServer(host="127.0.0.1", port=0, state_dir=tmp_path / "emu").start()
    try:
        found = Emulator(server.address).storage_client().get_bucket("lc")
        assert [dict(r) for r in found.lifecycle_rules] == [JOBS_RULE]
        assert found.metageneration == 2
        EmulatorControl(server.address).reset()
        assert Emulator(server.address).storage_client().lookup_bucket("lc") is None
    finally:
        server.stop()


def test_age_counts_whole_days_from_creation() -> None:
    created = datetime.datetime(2026, 1, 1, 12, tzinfo=datetime.timezone.utc)
    obj = {"name": "jobs/a", "timeCreated": "2026-01-01T12:00:00.000Z"}
    lifecycle = bucket_lifecycle.validate({"rule": [JOBS_RULE]})
    day = datetime.timedelta(days=1)
    assert bucket_lifecycle.due_for_deletion(lifecycle, [obj], created + 30 * day) == ["jobs/a"]
    second = datetime.timedelta(seconds=1)
    assert bucket_lifecycle.due_for_deletion(lifecycle, [obj], created + 30 * day - second) == []
    before = bucket_lifecycle.validate(
        {"rule": [{"action": {"type": "Delete"}, "condition": {"createdBefore": "2026-01-02"}}]}
    )
    assert bucket_lifecycle.due_for_deletion(before, [obj], created) == ["jobs/a"]
    assert bucket_lifecycle.validate({"rule": []}) is None
