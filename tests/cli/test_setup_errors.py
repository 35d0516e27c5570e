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
    assert "check --zone" in r.err and "permission tpu" not in r.err
