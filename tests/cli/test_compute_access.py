"""The emulator gates Compute Engine's calls as Google's front end does (the API enabled,
billing, the caller's permissions) and tpuctl says what to do: a project without the
Compute Engine API still lists its Cloud TPU API nodes."""

from __future__ import annotations

from tests.cli.conftest import one_line_error
from tests.emulator.test_gcloud import gcloud, gcloud_config

ZONE = "us-central1-c"
PROJECT = "tpuctl-demo"


def test_compute_engine_off_in_the_project(cli, emulator) -> None:
    assert cli("create", "old", "-a", "v3-8", "--zone", "us-central1-a").code == 0
    emulator.config(project_services={PROJECT: {"compute.googleapis.com": False}})
    r = cli("create", "iron", "-a", "tpu7x-8", "--zone", ZONE)
    assert r.code != 0
    line = one_line_error(r, after_call=True)
    assert "Compute Engine API (compute.googleapis.com) is disabled in project" in line
    assert "gcloud services enable compute.googleapis.com" in r.err
    listed = cli("list", "--all-zones")  # the TPU API's nodes are listed all the same
    assert listed.code == 0, listed.err
    assert [row.split()[0] for row in listed.out.strip().splitlines()[1:]] == ["old"]
    assert emulator.instances() == []
    emulator.config(project_services={})
    assert cli("delete", "old", "--zone", "us-central1-a", "--yes").code == 0


def test_a_missing_compute_permission_names_it_and_the_role(cli, emulator) -> None:
    emulator.config(denied_permissions=["compute.instances.create"])
    r = cli("create", "iron", "-a", "tpu7x-8", "--zone", ZONE)
    assert r.code != 0
    assert one_line_error(r, after_call=True) == (
        f"error: permission compute.instances.create denied in project {PROJECT}"
    )
    assert "roles/compute.instanceAdmin.v1" in r.err
    assert emulator.instances() == []


def test_gcloud_reads_the_compute_refusals(emulator) -> None:
    gcloud_config(
        {
            "api_endpoint_overrides/compute": f"http://{emulator.address}/",
            "auth/disable_credentials": "true",
            "project": PROJECT,
        }
    )
    emulator.config(denied_permissions=["compute.instances.list"])
    # a list that some requests failed: gcloud warns with the refusal, and lists what it could
    r = gcloud("compute", "instances", "list", "--zones", ZONE)
    assert f"Required 'compute.instances.list' permission for 'projects/{PROJECT}" in r.stderr
    emulator.config(denied_permissions=[],
                    project_services={PROJECT: {"compute.googleapis.com": False}})  # fmt: skip
    r = gcloud("compute", "instances", "describe", "x", "--zone", ZONE)
    assert r.returncode != 0 and "Compute Engine API has not been used in project" in r.stderr
