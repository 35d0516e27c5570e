"""tpuctl init, the lifecycle rule for old job folders: offered, added only with consent,
never reaching the staged code, other rules kept, and a rule already there respected."""

from __future__ import annotations

import json

import pytest

from tests.cli.test_init import JOBS_RULE, changes, lifecycle, step_lines
from tpuctl.config import write_config_values

BUCKET = "tpuctl-demo-tpuctl"
INIT = ("init", "--zone", "us-central1-a")


@pytest.fixture
def ready(emulator):  # noqa: ANN001, ANN201
    """A project ready but for the rule: the bucket made, the config written."""
    emulator.storage_client().create_bucket(BUCKET, location="us-central1")
    write_config_values({"project": "tpuctl-demo", "zone": "us-central1-a", "bucket": BUCKET})
    return emulator


def _retention(out: str) -> dict:
    return {s["step"]: s for s in json.loads(out)["steps"]}["retention"]


def test_the_rule_deletes_old_job_folders_and_never_the_staged_code(cli, ready) -> None:
    r = cli(*INIT, "--yes")
    assert r.code == 0, r.err
    assert step_lines(r.out)["retention"] == "done"
    assert lifecycle(ready) == [JOBS_RULE]
    bucket = ready.storage_client().bucket(BUCKET)
    names = [
        "tpuctl/jobs/20261201-0000-a/job.json",
        "tpuctl/jobs/20261201-0000-a/logs/attempt-1/worker-0.log",
        "tpuctl/jobs/20261201-0000-a/outputs/model.ckpt",
        "tpuctl/blobs/9f86d081884c7d659a2feaa0c55ad015",
        "data/train.tfrecord",
    ]
    for name in names:
        bucket.blob(name).upload_from_string(b"x")
    assert ready.run_lifecycle(29)["deleted"] == {BUCKET: []}
    assert sorted(ready.run_lifecycle(30)["deleted"][BUCKET]) == sorted(names[:3])
    left = sorted(b.name for b in ready.storage_client().list_blobs(BUCKET))
    assert left == ["data/train.tfrecord", "tpuctl/blobs/9f86d081884c7d659a2feaa0c55ad015"]


def test_the_users_rules_are_kept_beside_it(cli, ready) -> None:
    bucket = ready.storage_client().get_bucket(BUCKET)
    theirs = {"action": {"type": "Delete"}, "condition": {"age": 1, "matchesPrefix": ["tmp/"]}}
    bucket.lifecycle_rules = [theirs]
    bucket.patch()
    r = cli(*INIT, "--yes", "--job-retention", "14d")
    assert r.code == 0, r.err
    step = step_lines(r.out)
    assert step["retention"] == "done"
    assert lifecycle(ready) == [
        theirs,
        {"action": {"type": "Delete"}, "condition": {"age": 14, "matchesPrefix": ["tpuctl/jobs/"]}},
    ]
    # written only if nobody changed the bucket's metadata since it was read
    assert ready.requests()["PATCH storage.buckets.patch"] == 2


def test_a_rule_already_covering_job_folders_is_enough_and_one_reaching_blobs_is_named(
    cli, ready
) -> None:
    bucket = ready.storage_client().get_bucket(BUCKET)
    bucket.lifecycle_rules = [
        {
            "action": {"type": "SetStorageClass", "storageClass": "NEARLINE"},
            "condition": {"age": 2},
        },
        {"action": {"type": "Delete"}, "condition": {"age": 7}},  # everything, after a week
    ]
    bucket.patch()
    before = changes(ready)
    r = cli(*INIT, "--yes", "--json")
    assert r.code == 0, r.err
    step = _retention(r.out)
    assert step["status"] == "ok"
    assert step["found"] == (
        f"gs://{BUCKET} deletes job folders (tpuctl/jobs/) after 7 days; careful: a rule also "
        "deletes the staged code (tpuctl/blobs/) after 7 days, which a job restarted later needs"
    )
    assert changes(ready) == before  # nothing added


def test_a_rule_with_other_conditions_does_not_count(cli, ready) -> None:
    bucket = ready.storage_client().get_bucket(BUCKET)
    partial = {
        "action": {"type": "Delete"},
        "condition": {"age": 3, "matchesPrefix": ["tpuctl/"], "matchesSuffix": [".log"]},
    }
    bucket.lifecycle_rules = [partial]
    bucket.patch()
    r = cli(*INIT, "--yes", "--json")
    assert _retention(r.out)["status"] == "done"
    assert lifecycle(ready) == [partial, JOBS_RULE]


def test_retention_0_offers_nothing(cli, ready) -> None:
    r = cli(*INIT, "--yes", "--job-retention", "0", "--json")
    assert r.code == 0, r.err
    step = _retention(r.out)
    assert (step["status"], step["found"]) == (
        "ok",
        f"gs://{BUCKET} keeps job folders until deleted",
    )
    assert lifecycle(ready) == []
    assert "PATCH storage.buckets.patch" not in ready.requests()


def test_consent_is_asked_on_a_terminal(cli, ready) -> None:
    no = cli(*INIT, tty=True, stdin="n\n")
    assert no.code == 0, no.err
    assert (
        f"Add a lifecycle rule to gs://{BUCKET} deleting job folders older than 30 days?" in no.err
    )
    # (the prompt's last character, a space, goes to stdout: click reads the answer that way)
    assert "retention: skipped: " in no.out
    assert no.out.splitlines()[-1] == "all is ready in project tpuctl-demo"
    assert lifecycle(ready) == []
    yes = cli(*INIT, tty=True, stdin="y\n")
    assert yes.code == 0, yes.err
    assert "retention: done: " in yes.out
    assert lifecycle(ready) == [JOBS_RULE]


def test_a_caller_who_may_not_change_the_bucket_is_told_what_it_needs(cli, ready) -> None:
    ready.config(denied_permissions=["storage.buckets.update"])
    r = cli(*INIT, "--yes")
    assert r.code == 1
    assert step_lines(r.out)["retention"] == "FAILED"
    assert (
        "  to do: permission storage.buckets.update denied in project tpuctl-demo; grant" in r.out
    )
    assert "--role=roles/storage.admin`" in r.out
    assert r.out.splitlines()[-1].startswith("not ready: left for you: retention")
    assert lifecycle(ready) == []


def test_without_a_bucket_the_rule_waits_for_it(cli, emulator) -> None:
    r = cli(*INIT, "--json")  # no consent: the bucket is not made
    step = _retention(r.out)
    assert (step["status"], step["todo"]) == ("todo", "run init again")
    assert "storage.buckets.patch" not in str(emulator.requests())
