"""Errors: real HTTP status, Google's JSON error body, the service's wording.

Over REST, google-api-core picks the exception class from the HTTP status alone:
400 -> BadRequest (InvalidArgument and FailedPrecondition are its gRPC-only
subclasses), 403 -> Forbidden, 404 -> NotFound, 409 -> Conflict. The canonical
status name is in the body, which the exception keeps as `.response`.
"""

from __future__ import annotations

import re

import pytest
from google.api_core import exceptions as gx
from google.cloud import tpu_v2
from google.protobuf import field_mask_pb2

from tpuctl.catalog import runtime_for

PARENT = "projects/p/locations/us-central1-a"


def status_of(exc: gx.GoogleAPICallError) -> str:
    return exc.response.json()["error"]["status"]  # type: ignore[union-attr]


def make(client, node_id="n1", accelerator="v3-8", runtime=None, parent=PARENT, **kw):
    runtime = runtime or runtime_for(accelerator)
    node = tpu_v2.Node(accelerator_type=accelerator, runtime_version=runtime, **kw)
    return client.create_node(parent=parent, node_id=node_id, node=node)


def test_accelerator_not_in_zone(emulator) -> None:
    client = emulator.tpu_client()
    with pytest.raises(gx.BadRequest) as exc:
        make(client, accelerator="v4-128", parent="projects/p/locations/us-central1-b")
    assert status_of(exc.value) == "INVALID_ARGUMENT"
    assert exc.value.code == 400
    assert "the accelerator v4-128 was not found in zone us-central1-b" in exc.value.message
    with pytest.raises(gx.BadRequest, match="the accelerator v9-8 was not found"):
        make(client, accelerator="v9-8")


def test_unknown_runtime_version(emulator) -> None:
    with pytest.raises(gx.BadRequest) as exc:
        make(emulator.tpu_client(), runtime="tpu-vm-tf-0.1")
    assert status_of(exc.value) == "INVALID_ARGUMENT"
    assert "tpu-vm-tf-0.1" in exc.value.message


@pytest.mark.parametrize(
    "labels",
    [
        {"Team": "ml"},
        {"team": "ML"},
        {"1team": "x"},
        {"k": "v" * 64},
        {f"k{i}": "" for i in range(65)},
    ],
)
def test_invalid_labels(emulator, labels: dict[str, str]) -> None:
    with pytest.raises(gx.BadRequest) as exc:
        make(emulator.tpu_client(), labels=labels)
    assert status_of(exc.value) == "INVALID_ARGUMENT"
    assert "resource labels are invalid: " in exc.value.message


@pytest.mark.parametrize("node_id", ["Upper", "1st", "under_score", "trailing-", "x" * 64])
def test_invalid_node_id(emulator, node_id: str) -> None:
    with pytest.raises(gx.BadRequest) as exc:
        make(emulator.tpu_client(), node_id=node_id)
    assert status_of(exc.value) == "INVALID_ARGUMENT"
    assert "nodeId" in exc.value.message


def test_unknown_zone_is_permission_denied(emulator) -> None:
    client = emulator.tpu_client()
    with pytest.raises(gx.Forbidden) as exc:
        list(client.list_nodes(parent="projects/p/locations/xx-central9-z"))
    assert status_of(exc.value) == "PERMISSION_DENIED"
    assert "Permission denied on 'locations/xx-central9-z' (or it may not exist)." in str(exc.value)
    with pytest.raises(gx.Forbidden):
        make(client, parent="projects/p/locations/us-central1-z")


def test_missing_node_is_not_found(emulator) -> None:
    client = emulator.tpu_client()
    name = f"{PARENT}/nodes/ghost"
    with pytest.raises(gx.NotFound) as exc:
        client.get_node(name=name)
    assert status_of(exc.value) == "NOT_FOUND"
    assert f"Resource '{name}' was not found" in exc.value.message
    assert exc.value.details[0]["resourceName"] == name
    for call in (client.delete_node, client.stop_node, client.start_node):
        with pytest.raises(gx.NotFound):
            call(request={"name": name})


def test_duplicate_is_already_exists(emulator) -> None:
    client = emulator.tpu_client()
    make(client).result(timeout=10)
    with pytest.raises(gx.Conflict) as exc:
        make(client)
    assert status_of(exc.value) == "ALREADY_EXISTS"
    assert f"Resource '{PARENT}/nodes/n1' already exists" in exc.value.message
    client.delete_node(name=f"{PARENT}/nodes/n1").result(timeout=10)


def test_multi_host_slice_cannot_stop(emulator) -> None:
    client = emulator.tpu_client()
    parent = "projects/p/locations/us-central2-b"
    pod = make(client, "pod", "v4-32", parent=parent).result(timeout=10)
    assert len(pod.network_endpoints) == 4
    with pytest.raises(gx.BadRequest) as exc:
        client.stop_node(request={"name": pod.name})
    assert status_of(exc.value) == "FAILED_PRECONDITION"
    assert "only available with single TPU nodes" in exc.value.message
    assert client.get_node(name=pod.name).state == tpu_v2.Node.State.READY
    client.delete_node(name=pod.name).result(timeout=10)


def test_stop_and_start_need_the_right_state(emulator) -> None:
    client = emulator.tpu_client()
    node = make(client).result(timeout=10)
    with pytest.raises(gx.BadRequest) as exc:
        client.start_node(request={"name": node.name})
    assert status_of(exc.value) == "FAILED_PRECONDITION"
    assert "in state READY" in exc.value.message
    client.stop_node(request={"name": node.name}).result(timeout=10)
    with pytest.raises(gx.BadRequest, match="in state STOPPED"):
        client.stop_node(request={"name": node.name})
    emulator.durations(create=None)
    make(client, "creating")
    with pytest.raises(gx.BadRequest, match="in state CREATING"):
        client.stop_node(request={"name": f"{PARENT}/nodes/creating"})
    for name in (node.name, f"{PARENT}/nodes/creating"):
        client.delete_node(name=name).result(timeout=10)


def test_bad_update_masks(emulator) -> None:
    client = emulator.tpu_client()
    node = make(client).result(timeout=10)
    with pytest.raises(gx.BadRequest, match="Invalid update mask path 'runtime_version'"):
        client.update_node(
            node=tpu_v2.Node(name=node.name, runtime_version="v2-alpha"),
            update_mask=field_mask_pb2.FieldMask(paths=["runtime_version"]),
        )
    with pytest.raises(gx.BadRequest, match="resource labels are invalid"):
        client.update_node(
            node=tpu_v2.Node(name=node.name, labels={"Bad": "x"}),
            update_mask=field_mask_pb2.FieldMask(paths=["labels"]),
        )
    client.delete_node(name=node.name).result(timeout=10)


def test_error_body_shape(emulator) -> None:
    import json
    import urllib.error
    import urllib.request

    url = f"http://{emulator.address}/v2/{PARENT}/nodes/nope"
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(url, timeout=5)
    assert exc.value.code == 404
    body = json.load(exc.value)
    assert set(body["error"]) == {"code", "message", "status", "details"}
    assert body["error"]["code"] == 404
    assert body["error"]["details"][0]["@type"] == "type.googleapis.com/google.rpc.ResourceInfo"
    with pytest.raises(urllib.error.HTTPError) as unknown:
        urllib.request.urlopen(f"http://{emulator.address}/v2/no/such/path", timeout=5)
    assert unknown.value.code == 404
    assert re.search("not found", json.load(unknown.value)["error"]["message"])
