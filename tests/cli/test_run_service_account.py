"""`tpuctl run` and the VM's service account: the node gets the account and scopes asked
for, and when the account cannot do what the job needs, the agent's preflight ends the
job at once, the runner prints the missing permission with the command that grants it,
and the node is torn down."""

from __future__ import annotations

import json
from pathlib import Path

from tpuctl.emulator.tpu.models import project_number

PROJECT = "tpuctl-demo"
DEFAULT_SA = f"{project_number(PROJECT)}-compute@developer.gserviceaccount.com"
SA = f"trainer@{PROJECT}.iam.gserviceaccount.com"
SA_READ_WRITE = {
    "email": SA,
    "scope": [
        "https://www.googleapis.com/auth/cloud-platform",
        "https://www.googleapis.com/auth/devstorage.read_write",
    ],
}


def _script(tmp_path: Path) -> Path:
    script = tmp_path / "job.py"
    script.write_text("print('the script ran', flush=True)\n")
    return script


def _statuses(emulator) -> list[dict]:  # noqa: ANN001
    blobs = emulator.storage_client().list_blobs("tpuctl-demo-tpuctl", prefix="tpuctl/jobs/")
    return [json.loads(b.download_as_bytes()) for b in blobs if "/status/" in b.name]


def test_a_node_that_cannot_delete_itself_fails_the_job_and_is_torn_down(
    cli, emulator, tmp_path
) -> None:
    emulator.config(service_accounts={DEFAULT_SA: {"denied_permissions": ["tpu.nodes.delete"]}})
    r = cli("run", str(_script(tmp_path)), "-a", "v3-8")
    assert r.code == 6, r.err
    assert "the script ran" not in r.out
    assert f"{DEFAULT_SA} lacks tpu.nodes.delete" in r.err
    grant = (
        f"gcloud projects add-iam-policy-binding {PROJECT} "
        f"--member=serviceAccount:{DEFAULT_SA} --role=roles/tpu.admin"
    )
    assert grant in r.err
    assert emulator.nodes() == []  # the runner deleted it (the agent could not)
    (status,) = _statuses(emulator)
    assert status["state"] == "FAILED" and "tpu.nodes.delete" in status["message"]


def test_the_nodes_account_and_scopes_are_those_asked_for(cli, emulator, tmp_path) -> None:
    emulator.config(service_accounts={SA: {}})
    scopes = "cloud-platform,https://www.googleapis.com/auth/devstorage.read_write"
    r = cli("run", str(_script(tmp_path)), "-a", "v3-8", "--service-account", SA,
            "--scopes", scopes)  # fmt: skip
    assert r.code == 0, r.err
    assert "the script ran" in r.out
    (create,) = [b for b in emulator.bodies("create") if b["query"].get("nodeId")]
    assert create["body"]["serviceAccount"] == SA_READ_WRITE
    assert emulator.nodes() == []


def test_the_config_files_service_account_is_the_default(cli, emulator) -> None:
    from tpuctl.config import write_config_values

    write_config_values({"service_account": SA})
    r = cli("create", "sa1", "-a", "v3-8", "--zone", "us-central1-a")
    assert r.code == 0, r.err
    (create,) = [b for b in emulator.bodies("create") if b["query"].get("nodeId") == "sa1"]
    assert create["body"]["serviceAccount"] == {
        "email": SA,
        "scope": ["https://www.googleapis.com/auth/cloud-platform"],
    }
    (node,) = emulator.nodes()
    assert node["serviceAccount"]["email"] == SA
    assert cli("delete", "sa1", "--zone", "us-central1-a", "--yes").code == 0
    write_config_values({"service_account": "nobody"})
    bad = cli("create", "sa2", "-a", "v3-8", "--zone", "us-central1-a")
    assert bad.code == 3
    assert "service_account = 'nobody'" in bad.err and "expected a service account" in bad.err


def test_a_create_without_the_flags_states_the_default_scope_only(cli, emulator) -> None:
    r = cli("create", "sa3", "-a", "v3-8", "--zone", "us-central1-a", "--scopes", "bad://x")
    assert r.code == 2 and "invalid --scopes 'bad://x'" in r.err
    assert cli("create", "sa3", "-a", "v3-8", "--zone", "us-central1-a").code == 0
    (create,) = [b for b in emulator.bodies("create") if b["query"].get("nodeId") == "sa3"]
    assert create["body"]["serviceAccount"] == {
        "scope": ["https://www.googleapis.com/auth/cloud-platform"]
    }
    (node,) = emulator.nodes()  # the API's default: the project's compute account
    assert node["serviceAccount"]["email"] == DEFAULT_SA
    assert cli("delete", "sa3", "--zone", "us-central1-a", "--yes").code == 0


def test_a_job_file_names_the_account_and_scopes(cli, emulator, tmp_path) -> None:
    emulator.config(service_accounts={SA: {}})
    _script(tmp_path)
    (tmp_path / "job.toml").write_text(
        f'script = "job.py"\naccelerator = "v3-8"\nservice_account = "{SA}"\n'
        'scopes = ["cloud-platform", "devstorage.read_write"]\n'
    )
    r = cli("run", "-f", str(tmp_path / "job.toml"))
    assert r.code == 0, r.err
    (create,) = [b for b in emulator.bodies("create") if b["query"].get("nodeId")]
    assert create["body"]["serviceAccount"] == SA_READ_WRITE
