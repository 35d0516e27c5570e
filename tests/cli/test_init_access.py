"""tpuctl init, steps 3 and 6: the caller's permissions through Resource Manager's
testIamPermissions, and the nodes' service account through IAM and the Policy
Troubleshooter."""

from __future__ import annotations

import json

from tests.cli.test_init import step_lines
from tpuctl import google_apis
from tpuctl.emulator.tpu.models import project_number

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


def _service_account_step(cli, *extra: str) -> dict:  # noqa: ANN001
    r = cli(*INIT, "--json", *extra)
    return {s["step"]: s for s in json.loads(r.out)["steps"]}["service-account"]


GRANTS = (
    f"`gcloud storage buckets add-iam-policy-binding gs://{PROJECT}-tpuctl "
    f"--member=serviceAccount:{DEFAULT_SA} --role=roles/storage.objectUser`",
    f"`gcloud projects add-iam-policy-binding {PROJECT} "
    f"--member=serviceAccount:{DEFAULT_SA} --role=roles/tpu.admin`",
)


def test_the_default_service_account_holds_what_the_agent_needs(cli, emulator) -> None:
    step = _service_account_step(cli, "--yes")
    assert step["status"] == "ok"
    assert step["found"].startswith(
        f"the nodes' service account {DEFAULT_SA} holds what the agent needs"
    )
    # asked after the bucket was made: the storage permissions on the bucket itself
    assert f"on project {PROJECT} and bucket gs://{PROJECT}-tpuctl)" in step["found"]
    # each permission the agent needs, and the idle watchdog's
    assert emulator.requests()["POST iam.troubleshoot"] == len(google_apis.AGENT_PERMISSIONS) + 1
    assert "optional" not in step["found"]


def test_without_monitoring_the_watchdog_is_said_to_be_blind(cli, emulator) -> None:
    denied = {"denied_permissions": ["monitoring.timeSeries.list"]}
    emulator.config(service_accounts={DEFAULT_SA: denied})
    step = _service_account_step(cli)
    assert step["status"] == "ok"  # optional: idle nodes without a TPU holder still go
    assert step["found"].endswith(
        "; optional: it lacks monitoring.timeSeries.list, without which the idle watchdog "
        "cannot tell a TPU held but unused from a busy one, and keeps such a node "
        f"(`gcloud projects add-iam-policy-binding {PROJECT} "
        f"--member=serviceAccount:{DEFAULT_SA} --role=roles/monitoring.viewer`)"
    )


def test_what_the_account_lacks_is_named_with_the_grants(cli, emulator) -> None:
    lacking = ["storage.objects.create", "tpu.nodes.delete"]
    emulator.config(service_accounts={DEFAULT_SA: {"denied_permissions": lacking}})
    step = _service_account_step(cli)  # no bucket yet: storage asked on the project
    assert step["status"] == "todo"
    assert step["found"] == (
        f"the nodes' service account {DEFAULT_SA} lacks storage.objects.create, "
        f"tpu.nodes.delete on project {PROJECT}: a job's agent could not run or end its node"
    )
    assert step["todo"] == f"grant: {GRANTS[0]}; {GRANTS[1]}"
    emulator.config(service_accounts={DEFAULT_SA: {"denied_permissions": ["tpu.nodes.get"]}})
    step = _service_account_step(cli)
    assert (step["status"], step["todo"]) == ("todo", f"grant: {GRANTS[1]}")
    emulator.config(service_accounts={})
    assert _service_account_step(cli)["status"] == "ok"


def test_without_the_troubleshooter_the_account_is_not_checked(cli, emulator) -> None:
    emulator.config(
        service_accounts={DEFAULT_SA: {"denied_permissions": ["tpu.nodes.delete"]}},
        services={google_apis.POLICY_TROUBLESHOOTER: False},
    )
    step = _service_account_step(cli)
    assert step["status"] == "ok"
    assert step["found"].startswith(
        f"the nodes' service account {DEFAULT_SA} exists; what it holds was not checked "
        f"(the Policy Troubleshooter API ({google_apis.POLICY_TROUBLESHOOTER}) is disabled in "
        f"project {PROJECT});"
    )
    assert "each job checks them before its script starts" in step["found"]
    assert all(grant in step["found"] for grant in GRANTS)


def test_policies_the_caller_cannot_read_leave_the_answer_open(cli, emulator) -> None:
    emulator.config(denied_permissions=["resourcemanager.projects.getIamPolicy"])
    step = _service_account_step(cli)
    assert step["status"] == "ok"
    assert "the Policy Troubleshooter could not tell (UNKNOWN_INFO_DENIED" in step["found"]
    assert "roles/iam.securityReviewer" in step["found"]


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
