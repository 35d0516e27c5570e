"""google-api-python-client's `compute v1` service (its static discovery document)
against the emulated Compute Engine: paths, bodies and errors as a real client sees them.
Its `api_endpoint` replaces the root and the service path, so it ends in `/compute/v1/`."""

from __future__ import annotations

import json

import pytest
from googleapiclient.errors import HttpError

from tests.emulator.compute_helpers import ZONE, body


@pytest.fixture
def compute(emulator):
    from google.auth.credentials import AnonymousCredentials
    from googleapiclient.discovery import build

    return build(
        "compute", "v1", static_discovery=True, credentials=AnonymousCredentials(),
        client_options={"api_endpoint": f"http://{emulator.address}/compute/v1/"},
        cache_discovery=False,
    )  # fmt: skip


def test_discovery_client_lifecycle(compute, emulator) -> None:
    instances, operations = compute.instances(), compute.zoneOperations()
    op = instances.insert(project="p", zone=ZONE, body=body()).execute()
    done = operations.wait(project="p", zone=ZONE, operation=op["name"]).execute()
    assert done["status"] == "DONE" and done["operationType"] == "insert"
    vm = instances.get(project="p", zone=ZONE, instance="vm1").execute()
    assert vm["status"] == "RUNNING"

    listed = instances.list(project="p", zone=ZONE, maxResults=1).execute()
    assert [i["name"] for i in listed["items"]] == ["vm1"] and "nextPageToken" not in listed

    with pytest.raises(HttpError) as stale:
        stale_body = {"labels": {}, "labelFingerprint": "AAAAAAAAAAA="}
        instances.setLabels(project="p", zone=ZONE, instance="vm1", body=stale_body).execute()
    assert stale.value.resp.status == 412
    assert json.loads(stale.value.content)["error"]["errors"][0]["reason"] == "conditionNotMet"

    types = compute.machineTypes().list(project="p", zone="us-central1-a").execute()
    assert [m["name"] for m in types["items"]] == [
        "ct5lp-hightpu-1t", "ct5lp-hightpu-4t", "ct5lp-hightpu-8t", "ct5p-hightpu-4t"
    ]  # fmt: skip
    image = (
        compute.images()
        .getFromFamily(
            project="ubuntu-os-accelerator-images", family="ubuntu-accel-2204-amd64-tpu-v5e-v5p-v6e"
        )
        .execute()
    )
    assert image["status"] == "READY"

    gone = instances.delete(project="p", zone=ZONE, instance="vm1").execute()
    operations.wait(project="p", zone=ZONE, operation=gone["name"]).execute()
    assert emulator.instances() == []
    with pytest.raises(HttpError) as missing:
        operations.get(project="p", zone=ZONE, operation="operation-nope").execute()
    assert missing.value.resp.status == 404


def test_list_pages(compute, emulator) -> None:
    instances = compute.instances()
    for name in ("a1", "a2", "a3"):
        instances.insert(
            project="p", zone=ZONE, body=body(name=name, machine="ct6e-standard-1t")
        ).execute()
    first = instances.list(project="p", zone=ZONE, maxResults=2).execute()
    second = instances.list(project="p", zone=ZONE, maxResults=2,
                            pageToken=first["nextPageToken"]).execute()  # fmt: skip
    assert [i["name"] for i in first["items"] + second["items"]] == ["a1", "a2", "a3"]
    for name in ("a1", "a2", "a3"):
        instances.delete(project="p", zone=ZONE, instance=name).execute()
    assert emulator.instances() == []
