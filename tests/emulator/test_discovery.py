"""The same flows through google-api-python-client's discovery-based `tpu v2` client."""

from __future__ import annotations

import json

import pytest
from googleapiclient.errors import HttpError

ZONE_PARENT = "projects/p/locations/us-central1-a"


def wait(service, op: dict) -> dict:
    for _ in range(100):
        if op.get("done"):
            return op
        op = service.projects().locations().operations().get(name=op["name"]).execute()
    raise AssertionError(f"operation never finished: {op}")


def test_node_life_cycle(emulator) -> None:
    service = emulator.discovery_client()
    nodes = service.projects().locations().nodes()
    body = {"acceleratorType": "v3-8", "runtimeVersion": "tpu-vm-base", "labels": {"a": "b"}}
    op = nodes.create(parent=ZONE_PARENT, nodeId="d1", body=body).execute()
    assert op["metadata"]["@type"] == "type.googleapis.com/google.cloud.tpu.v2.OperationMetadata"
    done = wait(service, op)
    assert done["response"]["@type"] == "type.googleapis.com/google.cloud.tpu.v2.Node"
    assert done["response"]["state"] == "READY"
    name = f"{ZONE_PARENT}/nodes/d1"

    node = nodes.get(name=name).execute()
    assert node["apiVersion"] == "V2"
    assert node["acceleratorConfig"] == {"type": "V3", "topology": "2x2"}

    listed = nodes.list(parent="projects/p/locations/-").execute()
    assert [n["name"] for n in listed["nodes"]] == [name]
    assert listed["unreachable"] == []
    assert "nextPageToken" not in listed

    assert wait(service, nodes.stop(name=name, body={}).execute())["response"]["state"] == "STOPPED"
    assert wait(service, nodes.start(name=name, body={}).execute())["response"]["state"] == "READY"

    patch = nodes.patch(name=name, updateMask="labels", body={"labels": {"x": "y"}}).execute()
    assert wait(service, patch)["response"]["labels"] == {"x": "y"}
    snake = nodes.patch(
        name=name,
        updateMask="network_config.enable_external_ips",
        body={"networkConfig": {"enableExternalIps": True}},
    ).execute()
    (endpoint,) = wait(service, snake)["response"]["networkEndpoints"]
    assert endpoint["accessConfig"]["externalIp"] == endpoint["ipAddress"]

    attrs = nodes.getGuestAttributes(name=name, body={"queryPath": "hostkeys/"}).execute()
    items = attrs["guestAttributes"][0]["queryValue"]["items"]  # the worker's SSH host keys
    assert {(i["namespace"], i["key"]) for i in items} == {
        ("hostkeys", k) for k in ("ssh-ed25519", "ecdsa-sha2-nistp256", "ssh-rsa")
    }

    gone = wait(service, nodes.delete(name=name).execute())
    assert gone["response"] == {"@type": "type.googleapis.com/google.protobuf.Empty"}
    assert emulator.nodes() == []


def test_paging_with_list_next(emulator) -> None:
    service = emulator.discovery_client()
    nodes = service.projects().locations().nodes()
    for i in range(3):
        body = {"acceleratorType": "v3-8", "runtimeVersion": "tpu-vm-base"}
        wait(service, nodes.create(parent=ZONE_PARENT, nodeId=f"p{i}", body=body).execute())
    seen = []
    request = nodes.list(parent=ZONE_PARENT, pageSize=2)
    while request is not None:
        page = request.execute()
        seen.append([n["name"].rsplit("/", 1)[1] for n in page["nodes"]])
        request = nodes.list_next(request, page)
    assert seen == [["p0", "p1"], ["p2"]]
    for i in range(3):
        wait(service, nodes.delete(name=f"{ZONE_PARENT}/nodes/p{i}").execute())


def test_errors_are_http_errors_with_google_bodies(emulator) -> None:
    service = emulator.discovery_client()
    nodes = service.projects().locations().nodes()
    with pytest.raises(HttpError) as exc:
        nodes.get(name=f"{ZONE_PARENT}/nodes/none").execute()
    assert exc.value.status_code == 404
    assert json.loads(exc.value.content)["error"]["status"] == "NOT_FOUND"
    with pytest.raises(HttpError) as denied:
        nodes.list(parent="projects/p/locations/nowhere-1").execute()
    assert denied.value.status_code == 403
    assert "Permission denied on 'locations/nowhere-1'" in denied.value.reason


def test_catalog_resources(emulator) -> None:
    service = emulator.discovery_client()
    locations = service.projects().locations()
    types = locations.acceleratorTypes().list(parent="projects/p/locations/us-central2-b").execute()
    assert {t["type"] for t in types["acceleratorTypes"]} >= {"v4-8", "v4-32"}
    one = (
        locations.acceleratorTypes()
        .get(name="projects/p/locations/us-central2-b/acceleratorTypes/v4-32")
        .execute()
    )
    assert one["acceleratorConfigs"] == [{"type": "V4", "topology": "2x2x4"}]
    versions = locations.runtimeVersions().list(parent=ZONE_PARENT).execute()["runtimeVersions"]
    assert "v2-alpha-tpuv5-lite" in [v["version"] for v in versions]
    zone = locations.get(name="projects/p/locations/us-west4-a").execute()
    assert zone["locationId"] == "us-west4-a"
    all_zones = locations.list(name="projects/p").execute()["locations"]
    assert "us-east5-b" in [loc["locationId"] for loc in all_zones]
