"""tpuctl init, both ways: a new project made ready, and a ready one left alone."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.cli.conftest import one_line_error
from tpuctl.config import load_config_file, write_config_values

INIT = ("init", "--accelerator", "v5litepod-8", "--zone", "us-west4-a")
SERVING = "TPUV5sLitepodServingPerProjectPerZoneForTPUAPI"
REQUIRED = [
    "tpu.googleapis.com",
    "storage.googleapis.com",
    "cloudquotas.googleapis.com",
    "cloudresourcemanager.googleapis.com",
    "iam.googleapis.com",
    "policytroubleshooter.googleapis.com",
]


def new_project(emulator) -> None:  # noqa: ANN001
    """Every API off, 0 quota for v5e, no bucket (the fixture's emulator has none)."""
    emulator.config(services="none", quotas="new-project")


def changes(emulator) -> dict[str, int]:  # noqa: ANN001
    counts = emulator.requests()
    reads = {
        "POST projects.testIamPermissions",
        "POST iam.troubleshoot",
        "POST tokeninfo",  # who the caller is
    }  # POSTs that change nothing
    return {
        k: v
        for k, v in counts.items()
        if k.startswith(("POST", "PATCH", "DELETE")) and k not in reads
    }


def bucket_exists(emulator, name: str = "tpuctl-demo-tpuctl") -> bool:  # noqa: ANN001
    return emulator.storage_client().lookup_bucket(name) is not None


STEPS = (
    "project",
    "apis",
    "permissions",
    "quota",
    "bucket",
    "service-account",
    "retention",
    "config",
)
JOBS_RULE = {
    "action": {"type": "Delete"},
    "condition": {"age": 30, "matchesPrefix": ["tpuctl/jobs/"]},
}


def statuses(*given: str) -> dict[str, str]:
    return dict(zip(STEPS, given, strict=True))


def lifecycle(emulator, name: str = "tpuctl-demo-tpuctl") -> list[dict]:  # noqa: ANN001
    return [dict(r) for r in emulator.storage_client().get_bucket(name).lifecycle_rules]


def step_lines(out: str) -> dict[str, str]:
    return {
        ln.split(":", 1)[0]: ln.split(": ", 2)[1]
        for ln in out.splitlines()
        if not ln.startswith(" ") and ln.count(": ") >= 2
    }


def test_a_new_project_is_made_ready_and_a_second_run_changes_nothing(cli, emulator) -> None:
    new_project(emulator)
    r = cli(*INIT, "--yes")
    assert r.code == 0, r.err
    assert step_lines(r.out) == statuses(
        "ok", "done", "ok", "pending", "done", "ok", "done", "done"
    )
    assert f"  did: enabled {', '.join(REQUIRED)}" in r.out
    assert (  # the file's own words, not eaten as rich markup
        "config: done: tpuctl's config file lacked project = tpuctl-demo; "
        '[projects."tpuctl-demo"] zone = us-west4-a, bucket = tpuctl-demo-tpuctl'
    ) in r.out
    assert (
        "  did: added a lifecycle rule: objects under tpuctl/jobs/ older than 30 days are deleted"
    ) in r.out
    assert lifecycle(emulator) == [JOBS_RULE]
    assert f"{SERVING} allows 0 chips in zone us-west4-a, 0 in use; v5litepod-8 needs 8" in r.out
    assert "  did: created gs://tpuctl-demo-tpuctl in us-west4 (uniform bucket-level access)" in (
        r.out
    )
    assert r.out.splitlines()[-1] == (
        "all done that can be done now in project tpuctl-demo; still pending: quota "
        "(Google decides; see `tpuctl quota`)"
    )
    assert emulator.config()["project_services"] == {"tpuctl-demo": dict.fromkeys(REQUIRED, True)}
    # one batch, as `gcloud services enable A B ...` sends it
    assert emulator.requests()["POST services.batchEnable"] == 1
    assert "POST services.enable" not in emulator.requests()
    assert bucket_exists(emulator)
    prefs = list(
        emulator.quotas_client().list_quota_preferences(
            parent="projects/tpuctl-demo/locations/global"
        )
    )
    assert [(p.quota_id, dict(p.dimensions), p.quota_config.preferred_value) for p in prefs] == [
        (SERVING, {"zone": "us-west4-a"}, 8)
    ]
    assert prefs[0].contact_email == "you@example.com" and prefs[0].reconciling
    # the zone and bucket are the project's own: another project's commands never take them
    assert load_config_file() == {
        "project": "tpuctl-demo",
        "projects": {"tpuctl-demo": {"zone": "us-west4-a", "bucket": "tpuctl-demo-tpuctl"}},
    }
    # said as it is done, --yes or not
    assert (
        'Write project = tpuctl-demo; [projects."tpuctl-demo"] zone = us-west4-a, '
        "bucket = tpuctl-demo-tpuctl to tpuctl's config file (--yes)"
    ) in r.err
    made = changes(emulator)

    again = cli(*INIT, "--yes")
    assert again.code == 0, again.err
    assert step_lines(again.out) == statuses("ok", "ok", "ok", "pending", "ok", "ok", "ok", "ok")
    assert (
        "retention: ok: gs://tpuctl-demo-tpuctl deletes job folders (tpuctl/jobs/) after 30 days"
        in (again.out)
    )
    assert "did:" not in again.out
    assert f"the quota increase request {prefs[0].name.rsplit('/', 1)[1]} (8) is under review" in (
        again.out
    )
    assert changes(emulator) == made  # nothing asked twice

    # Google grants the request: now all is ready
    emulator.call("POST", "quota-preferences/decide", {"name": prefs[0].name, "granted": 8})
    ready = cli(*INIT)
    assert ready.code == 0
    assert ready.out.splitlines()[-1] == "all is ready in project tpuctl-demo"
    assert "quota: ok:" in ready.out


def test_a_ready_project_is_left_alone(cli, emulator) -> None:
    emulator.storage_client().create_bucket("tpuctl-demo-tpuctl", location="us-central1")
    write_config_values({"project": "tpuctl-demo", "zone": "us-central1-a"})
    write_config_values({"bucket": "tpuctl-demo-tpuctl"})
    before = changes(emulator)  # the bucket made above
    r = cli("init", "--accelerator", "v3-8")
    assert r.code == 0, r.err
    # the lifecycle rule is offered, and declined without a terminal: optional, not left
    assert step_lines(r.out) == statuses("ok", "ok", "ok", "ok", "ok", "ok", "skipped", "ok")
    assert (
        "  to add it: `tpuctl init --yes` adds it; `--job-retention 0` stops offering it"
    ) in r.out
    assert r.out.splitlines()[-1] == "all is ready in project tpuctl-demo"
    assert changes(emulator) == before
    assert "optional, off" not in r.out  # the emulator's default project has every API


def test_without_consent_nothing_changes_and_the_commands_are_given(cli, emulator) -> None:
    new_project(emulator)
    r = cli(*INIT)  # stdin is not a terminal and no --yes: no consent
    assert r.code == 1
    assert step_lines(r.out)["apis"] == "to do"
    assert f"  to do: `gcloud services enable {' '.join(REQUIRED)} --project tpuctl-demo`" in (
        r.out
    )
    assert "not ready: left for you: apis, " in r.out and "run again with --yes" in r.out
    assert changes(emulator) == {}
    assert not bucket_exists(emulator)
    assert load_config_file() == {}


def test_consent_is_asked_on_a_terminal(cli, emulator) -> None:
    new_project(emulator)
    r = cli(*INIT, tty=True, stdin="n\n" * 10)
    assert r.code == 1
    assert "Enable tpu.googleapis.com storage.googleapis.com" in r.err
    assert changes(emulator) == {}


def test_billing_off_fails_the_apis_step_with_the_fix(cli, emulator) -> None:
    emulator.config(services="none", billing=False)
    r = cli(*INIT, "--yes")
    assert r.code == 1
    assert step_lines(r.out)["apis"] == "FAILED"
    assert "billing is disabled in project tpuctl-demo" in r.out
    assert "gcloud billing projects link tpuctl-demo" in r.out


def test_a_missing_permission_is_named_with_the_grant(cli, emulator) -> None:
    emulator.config(denied_permissions=["tpu.nodes.list"])
    r = cli("init", "--zone", "us-central1-a", "--yes")
    assert r.code == 1
    assert step_lines(r.out)["permissions"] == "to do"
    assert "permission tpu.nodes.list denied in project tpuctl-demo" in r.out
    assert "--role=roles/tpu.viewer" in r.out


def test_json_reports_every_step(cli, emulator) -> None:
    new_project(emulator)
    r = cli(*INIT, "--yes", "--json")
    data = json.loads(r.out)
    assert data["ready"] is False and data["project"] == "tpuctl-demo"
    assert {s["step"]: s["status"] for s in data["steps"]} == statuses(
        "ok", "done", "ok", "pending", "done", "ok", "done", "done"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--accelerator", "v9-8"), "invalid --accelerator 'v9-8'"),
        (("--accelerator", "v4-8", "--zone", "us-west4-a"), "zone us-west4-a does not offer it"),
        (("--zone", "nowhere"), "invalid --zone 'nowhere'"),
        (("--job-retention", "soon"), "'--job-retention': 'soon': whole days from 1 to 3650"),
        (("--job-retention", "4000"), "'--job-retention': '4000': whole days from 1 to 3650"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(cli, emulator, args, message) -> None:
    r = cli("init", *args)
    assert r.code == 2
    assert message in one_line_error(r)
    assert changes(emulator) == {}


def test_the_config_file_keeps_its_other_keys(isolated_env: Path) -> None:
    path = Path(os.environ["TPUCTL_CONFIG"])
    path.parent.mkdir(parents=True)
    path.write_text('# mine\nzone = "us-east5-a"\n\n[prices]\n"v6e" = 2.7\n')
    write_config_values({"zone": "us-west4-a", "bucket": 'odd"name'})
    assert load_config_file() == {
        "zone": "us-west4-a",
        "bucket": 'odd"name',
        "prices": {"v6e": 2.7},
    }
    assert path.read_text().startswith("# mine\n")


def test_each_project_has_its_own_zone_and_bucket(isolated_env: Path) -> None:
    from tpuctl.services.staging import bucket_name
    from tpuctl.target_resolution import resolve_target

    write_config_values({"project": "alpha-proj", "zone": "us-central1-a"})
    write_config_values({"zone": "us-west4-a", "bucket": "alpha-jobs"}, project="alpha-proj")
    path = Path(os.environ["TPUCTL_CONFIG"])
    path.write_text(
        path.read_text() + '\n[projects.beta-proj]\nzones = ["us-east5-a", "us-east5-b"]\n'
    )
    config = load_config_file()
    assert resolve_target("alpha-proj").zone == "us-west4-a"
    assert resolve_target("beta-proj", many_zones=True).zones == ("us-east5-a", "us-east5-b")
    assert resolve_target("gamma-proj").zone == "us-central1-a"  # no table: the top-level zone
    assert bucket_name(None, config, "alpha-proj") == "alpha-jobs"
    assert bucket_name(None, config, "beta-proj") == "beta-proj-tpuctl"  # never alpha's bucket
    write_config_values({"bucket": "alpha-other"}, project="alpha-proj")  # rewritten in place
    assert load_config_file()["projects"]["alpha-proj"] == {
        "zone": "us-west4-a",
        "bucket": "alpha-other",
    }


def test_a_project_for_tpu7x_gets_compute_engine_and_its_permissions_checked(cli, emulator) -> None:
    new_project(emulator)
    emulator.config(denied_permissions=["compute.instanceGroupManagers.create"])
    r = cli("init", "--accelerator", "tpu7x-8", "--zone", "us-central1-c", "--yes")
    assert f"  did: enabled {', '.join([*REQUIRED, 'compute.googleapis.com'])}" in r.out, r.out
    services = emulator.config()["project_services"]["tpuctl-demo"]
    assert services["compute.googleapis.com"] is True
    assert "compute.instanceGroupManagers.create denied in project tpuctl-demo" in r.out
    assert "roles/compute.instanceAdmin.v1" in r.out
    # a new project has no on-demand TPU quota on Compute Engine: init says where to ask
    assert (
        "Compute Engine's TPUS-PER-TPU-FAMILY-per-project-region (TPU7X) allows 0 chips in "
        "region us-central1, 0 in use; tpu7x-8 needs 4"
    ) in r.out
    assert "service=compute.googleapis.com" in r.out
    # a project whose TPUs stay on the Cloud TPU API is not asked to turn Compute Engine on
    new_project(emulator)
    r = cli("init", "--accelerator", "v3-8", "--zone", "us-central1-a", "--yes")
    assert "compute.googleapis.com (for TPUs on Compute Engine" in r.out
    assert "compute.googleapis.com" not in emulator.config()["project_services"]["tpuctl-demo"]
