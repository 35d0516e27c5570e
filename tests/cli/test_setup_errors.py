"""The errors a new project meets, told in one line with the fix, by every command."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import one_line_error

TPU_OFF = (
    "error: the Cloud TPU API (tpu.googleapis.com) is disabled in project tpuctl-demo",
    "hint: enable it: `gcloud services enable tpu.googleapis.com --project tpuctl-demo` "
    "(or run `tpuctl init`)",
)


@pytest.mark.parametrize(
    "args",
    [
        ["create", "n1", "-a", "v3-8", "--zone", "us-central1-a"],
        ["list"],
        ["list", "--all-zones"],
        ["describe", "n1"],
        ["delete", "n1", "--yes"],
        ["quota", "--zone", "us-central1-a"],
    ],
)
def test_a_disabled_tpu_api_is_one_line_with_the_enable_command(cli, emulator, args) -> None:
    emulator.config(services={"tpu.googleapis.com": False})
    r = cli(*args)
    assert r.code == 3, r.err
    assert one_line_error(r, after_call=True) == TPU_OFF[0]
    assert TPU_OFF[1] in r.err.splitlines()
    assert emulator.nodes() == []


def test_run_on_a_project_without_the_tpu_api_stops_before_anything(
    cli, emulator, tmp_path: Path
) -> None:
    script = tmp_path / "job.py"
    script.write_text("print('hi')\n")
    emulator.config(services="new-project")
    r = cli("run", str(script), "-a", "v3-8")
    assert r.code == 3, r.err
    assert one_line_error(r, after_call=True) == TPU_OFF[0]
    assert emulator.nodes() == []


def test_billing_off_says_to_link_a_billing_account(cli, emulator) -> None:
    emulator.config(billing=False)
    r = cli("list")
    assert r.code == 3
    assert one_line_error(r) == (
        "error: billing is disabled in project tpuctl-demo: Cloud TPU and the APIs it needs "
        "are paid"
    )
    assert "gcloud billing projects link tpuctl-demo --billing-account=ACCOUNT_ID" in r.err


def test_a_missing_permission_names_it_and_a_role_that_grants_it(cli, emulator) -> None:
    emulator.config(denied_permissions=["tpu.nodes.create"])
    r = cli("create", "n1", "-a", "v3-8", "--zone", "us-central1-a")
    assert r.code == 6
    assert one_line_error(r, after_call=True) == (
        "error: permission tpu.nodes.create denied in project tpuctl-demo"
    )
    assert (
        "gcloud projects add-iam-policy-binding tpuctl-demo --member=user:YOU@example.com "
        "--role=roles/tpu.admin" in r.err
    )
    assert cli("list").code == 0  # the other permissions are there
    assert emulator.nodes() == []


def test_an_unknown_zone_is_still_told_as_a_zone(cli, emulator) -> None:
    r = cli("list", "--zone", "mars-north1-a")
    assert "unknown zone 'mars-north1-a'" in r.err and "permission" not in r.err


LOCATIONS_HINT = (
    "`gcloud resource-manager org-policies describe gcp.resourceLocations --project "
    "tpuctl-demo --effective`"
)


@pytest.mark.parametrize("queued", [[], ["--queued"]])
def test_an_org_policy_on_locations_names_the_zone_and_how_to_see_the_allowed_ones(
    cli, emulator, queued
) -> None:
    emulator.config(org_policy={"resource_locations": ["europe-west4"]})
    r = cli("create", "n1", "-a", "v3-8", "--zone", "us-central1-a", *queued)
    assert r.code == 3, r.err
    assert one_line_error(r, after_call=True) == (
        "error: an organisation policy (constraints/gcp.resourceLocations) does not allow "
        "us-central1-a in project tpuctl-demo"
    )
    assert LOCATIONS_HINT in r.err
    assert emulator.nodes() == [] and emulator.queued() == []
    # a zone of an allowed region is fine
    r = cli("create", "n1", "-a", "v3-8", "--zone", "europe-west4-a", *queued)
    assert r.code == 0, r.err
    assert cli("delete", "n1", "--zone", "europe-west4-a", "--yes").code == 0


def test_an_org_policy_against_external_ips_points_to_internal_ip_only(cli, emulator) -> None:
    emulator.config(org_policy={"vm_external_ip_access": False})
    r = cli("create", "n1", "-a", "v3-8")
    assert r.code == 3, r.err
    assert one_line_error(r, after_call=True) == (
        "error: an organisation policy (constraints/compute.vmExternalIpAccess) forbids "
        "external IP addresses on VMs in project tpuctl-demo"
    )
    assert "--internal-ip-only" in r.err
    r = cli("create", "n1", "-a", "v3-8", "--internal-ip-only")
    assert r.code == 0, r.err
    assert cli("delete", "n1", "--yes").code == 0


def test_a_missing_tpu_service_agent_says_how_to_recreate_it(cli, emulator, tmp_path) -> None:
    emulator.config(tpu_service_agent=False)
    number = emulator.config()["tpu_service_agent"] is False and "service-"
    script = tmp_path / "job.py"
    script.write_text("print('hi')\n")
    for args in (["create", "n1", "-a", "v3-8"], ["run", str(script), "-a", "v3-8"]):
        r = cli(*args)
        assert r.code == 3, r.err
        line = one_line_error(r, after_call=True)
        assert line.startswith("error: the Cloud TPU service agent of project tpuctl-demo (")
        assert number in line and "@cloud-tpu.iam.gserviceaccount.com)" in line
        assert line.endswith("is missing or lacks roles/tpu.serviceAgent")
        assert (
            "`gcloud beta services identity create --service=tpu.googleapis.com --project "
            "tpuctl-demo`" in r.err
        )
    assert emulator.nodes() == []


def test_the_policies_are_checked_as_config(emulator) -> None:
    with pytest.raises(Exception, match="org_policy takes"):
        emulator.config(org_policy={"anything": 1})
    with pytest.raises(Exception, match="tpu_service_agent must be true or false"):
        emulator.config(tpu_service_agent="no")
