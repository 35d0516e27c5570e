"""gcloud's `compute instances` commands, with a scratch configuration, against the
emulated Compute Engine (the override `http://HOST:PORT/`: gcloud appends
`compute/v1/...`, or `compute/beta/...` for beta commands)."""

from __future__ import annotations

import json

import pytest

from tests.emulator.test_gcloud import gcloud, gcloud_config

ZONE = "us-east1-d"
IMAGE = ("--image-family", "ubuntu-accel-2204-amd64-tpu-v5e-v5p-v6e",
         "--image-project", "ubuntu-os-accelerator-images")  # fmt: skip


@pytest.fixture
def configured(emulator):
    # CLOUDSDK_CONFIG already points at a scratch dir (see the isolated_env fixture)
    gcloud_config(
        {
            "api_endpoint_overrides/compute": f"http://{emulator.address}/",
            "auth/disable_credentials": "true",
            "project": "p",
        }
    )
    return emulator


def test_gcloud_create_describe_list_label_delete(configured) -> None:
    made = gcloud(
        "compute", "instances", "create", "g1", "--zone", ZONE, "--machine-type",
        "ct6e-standard-4t", "--maintenance-policy", "TERMINATE", *IMAGE, "--labels", "team=ml",
        "--metadata", "enable-guest-attributes=TRUE",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert made.stdout.split("\n")[1].split()[-1] == "RUNNING"
    (instance,) = configured.instances()
    assert instance["machineType"] == "ct6e-standard-4t"

    described = gcloud("compute", "instances", "describe", "g1", "--zone", ZONE, "--format", "json")
    assert described.returncode == 0, described.stderr
    data = json.loads(described.stdout)
    assert data["scheduling"]["onHostMaintenance"] == "TERMINATE"
    assert data["disks"][0]["boot"] is True and data["disks"][0]["autoDelete"] is True
    assert data["networkInterfaces"][0]["accessConfigs"][0]["natIP"].startswith("127.")
    assert data["serviceAccounts"][0]["email"].endswith("-compute@developer.gserviceaccount.com")

    listed = gcloud("compute", "instances", "list", "--filter", "labels.team=ml")
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.splitlines()
    assert header.split()[:3] == ["NAME", "ZONE", "MACHINE_TYPE"]
    assert row.split()[:3] == ["g1", ZONE, "ct6e-standard-4t"]
    zonal = gcloud("compute", "instances", "list", "--zones", ZONE, "--filter", "status=RUNNING")
    assert zonal.returncode == 0 and "g1" in zonal.stdout, zonal.stderr

    labelled = gcloud("compute", "instances", "add-labels", "g1", "--zone", ZONE,
                      "--labels", "owner=alice")  # fmt: skip
    assert labelled.returncode == 0, labelled.stderr
    labels = gcloud("compute", "instances", "describe", "g1", "--zone", ZONE,
                    "--format", "value(labels)")  # fmt: skip
    assert labels.stdout.strip() == "owner=alice;team=ml"

    keys = gcloud("compute", "instances", "get-guest-attributes", "g1", "--zone", ZONE,
                  "--query-path", "hostkeys/", "--format", "json")  # fmt: skip
    assert keys.returncode == 0, keys.stderr
    assert "ssh-ed25519" in [k["key"] for k in json.loads(keys.stdout)]

    # two at once: gcloud batches them; the missing one fails alone
    gone = gcloud("compute", "instances", "delete", "g1", "nope", "--zone", ZONE, "--quiet")
    assert gone.returncode != 0
    assert f"The resource 'projects/p/zones/{ZONE}/instances/nope' was not found" in gone.stderr
    assert configured.instances() == []


def test_gcloud_refuses_as_compute_does(configured) -> None:
    live = gcloud("compute", "instances", "create", "g1", "--zone", ZONE,
                  "--machine-type", "ct6e-standard-4t", *IMAGE)  # fmt: skip
    assert live.returncode != 0
    assert "Instances with guest accelerators do not support live migration." in live.stderr
    unknown = gcloud("compute", "instances", "create", "g1", "--zone", ZONE, "--machine-type",
                     "ct6e-standard-9t", "--maintenance-policy", "TERMINATE", *IMAGE)  # fmt: skip
    assert unknown.returncode != 0
    assert "Machine type with name 'ct6e-standard-9t' does not exist in zone" in unknown.stderr
    assert "gcloud compute machine-types list --zones" in unknown.stderr  # gcloud's own hint
    assert configured.instances() == []


def test_gcloud_spot_stop_start_and_beta(configured) -> None:
    made = gcloud(
        "beta", "compute", "instances", "create", "s1", "--zone", "us-central1-c",
        "--machine-type", "tpu7x-standard-4t", "--maintenance-policy", "TERMINATE",
        "--image-family", "ubuntu-accel-2404-amd64-tpu-tpu7x",
        "--image-project", "ubuntu-os-accelerator-images",
        "--provisioning-model", "SPOT", "--instance-termination-action", "DELETE",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    (insert,) = configured.bodies("compute.instances.insert")
    assert insert["path"].startswith("/compute/beta/")
    assert insert["body"]["scheduling"]["provisioningModel"] == "SPOT"
    for verb, status in (("stop", "TERMINATED"), ("start", "RUNNING")):
        done = gcloud("compute", "instances", verb, "s1", "--zone", "us-central1-c")
        assert done.returncode == 0, done.stderr
        (instance,) = configured.instances()
        assert instance["status"] == status
    gone = gcloud("compute", "instances", "delete", "s1", "--zone", "us-central1-c", "--quiet")
    assert gone.returncode == 0, gone.stderr
