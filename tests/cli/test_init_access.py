"""tpuctl init, steps 3 and 4: the caller's permissions through Resource Manager's
testIamPermissions, and the nodes' service account through IAM."""

from __future__ import annotations

import json

from tests.cli.test_init import step_lines
from tpuctl.emulator.models import project_number

PROJECT = "tpuctl-demo"
DEFAULT_SA = f"{project_number(PROJECT)}-compute@developer.gserviceaccount.com"
INIT = ("init", "--zone", "us-central1-a")


def test_missing_permissions_are_tested_and_named_with_their_roles(cli, emulator) -> None:
    emulator.config(denied_permissions=["tpu.nodes.create", "storage.buckets.create"])
    r = cli(*INIT)
    assert r.code == 1
    assert step_lines(r.out)["permissions"] == "to do"
    assert "2 missing" in r.out
    assert (
        f"permissions tpu.nodes.create, storage.buckets.create denied in project {PROJECT}" in r.out
    )
    for role in ("roles/storage.admin", "roles/tpu.admin"):
        assert f"--member=user:you@example.com --role={role}`" in r.out
    # a test, not a try: nothing was created to find out
    assert emulator.requests().get("POST create") is None
    assert emulator.requests()["POST projects.testIamPermissions"] == 1


def test_without_resource_manager_listing_nodes_stands_in(cli, emulator) -> None:
    emulator.config(services={"cloudresourcemanager.googleapis.com": False})
    r = cli(*INIT, "--json")
    steps = {s["step"]: s for s in json.loads(r.out)["steps"]}
    assert steps["permissions"]["status"] == "ok"
    assert "Cloud Resource Manager API is off" in steps["permissions"]["found"]
    assert emulator.requests()["GET list"] == 1


def test_the_default_service_account_is_found_with_what_it_needs(cli, emulator) -> None:
    r = cli(*INIT, "--json")
    step = {s["step"]: s for s in json.loads(r.out)["steps"]}["service-account"]
    assert step["status"] == "ok"
    assert f"the nodes' service account {DEFAULT_SA} exists" in step["found"]
    assert (
        f"`gcloud storage buckets add-iam-policy-binding gs://{PROJECT}-tpuctl "
        f"--member=serviceAccount:{DEFAULT_SA} --role=roles/storage.objectUser`"
    ) in step["found"]
    assert (
        f"`gcloud projects add-iam-policy-binding {PROJECT} "
        f"--member=serviceAccount:{DEFAULT_SA} --role=roles/tpu.admin`"
    ) in step["found"]


def test_a_named_account_that_does_not_exist_is_left_to_do(cli, emulator) -> None:
    missing = f"trainer@{PROJECT}.iam.gserviceaccount.com"
    r = cli(*INIT, "--service-account", missing)
    assert r.code == 1
    assert step_lines(r.out)["service-account"] == "to do"
    assert f"the nodes' service account {missing} does not exist" in r.out
    assert f"`gcloud iam service-accounts create trainer --project {PROJECT}`" in r.out
    emulator.config(service_accounts={missing: {}})
    again = cli(*INIT, "--service-account", missing)
    assert step_lines(again.out)["service-account"] == "ok"
