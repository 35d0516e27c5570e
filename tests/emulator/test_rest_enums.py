"""What Google's own REST clients send and read: google-cloud-tpu's REST transport asks
for `$alt=json;enum-encoding=int` and gets enums as numbers; a proto3 default
(`reservationName: ""`) means unset; the runtime Google's own samples test with is
offered where they use it."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from google.api_core.client_options import ClientOptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import tpu_v2

PROJECT = "p"
# python-docs-samples' tpu/test_tpu.py: a v5e node in us-south1-a with a TF image
ZONE = "us-south1-a"
PARENT = f"projects/{PROJECT}/locations/{ZONE}"
RUNTIME = "tpu-vm-tf-2.17.0-pjrt"


def _client(emulator) -> tpu_v2.TpuClient:
    return tpu_v2.TpuClient(
        transport="rest",
        client_options=ClientOptions(api_endpoint=f"http://{emulator.address}"),
        credentials=AnonymousCredentials(),
    )


def _raw(emulator, path: str, alt: str = "json;enum-encoding=int", body: Any = None) -> Any:
    url = f"http://{emulator.address}/v2/{path}?%24alt={alt}"
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="GET" if body is None else "POST")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())


def test_the_rest_client_creates_gets_and_lists_a_v5e_node(emulator) -> None:
    client = _client(emulator)
    node = tpu_v2.Node(accelerator_type="v5litepod-1", runtime_version=RUNTIME)
    made = client.create_node(parent=PARENT, node_id="v5e", node=node).result(timeout=10)
    assert made.state == tpu_v2.Node.State.READY
    assert made.accelerator_config.type_ == tpu_v2.AcceleratorConfig.Type.V5LITE_POD
    got = client.get_node(name=made.name)
    assert got.health == tpu_v2.Node.Health.HEALTHY
    assert got.api_version == tpu_v2.Node.ApiVersion.V2
    assert [n.name for n in client.list_nodes(parent=PARENT)] == [made.name]
    # what the client asked for, on the wire
    (create,) = emulator.bodies("create")
    assert create["query"]["$alt"] == "json;enum-encoding=int"
    client.delete_node(name=made.name).result(timeout=10)


def test_enums_are_numbers_when_asked_names_otherwise(emulator) -> None:
    client = _client(emulator)
    node = tpu_v2.Node(accelerator_type="v5litepod-4", runtime_version="v2-alpha-tpuv5-lite")
    made = client.create_node(parent=PARENT, node_id="n", node=node).result(timeout=10)
    numbers = _raw(emulator, f"{made.name}")
    assert numbers["acceleratorConfig"]["type"] == tpu_v2.AcceleratorConfig.Type.V5LITE_POD.value
    assert numbers["state"] == tpu_v2.Node.State.READY.value
    assert numbers["apiVersion"] == tpu_v2.Node.ApiVersion.V2.value
    assert numbers["acceleratorConfig"]["topology"] == "2x2"  # the rest as it was
    listed = _raw(emulator, f"{PARENT}/nodes")
    assert listed["nodes"][0]["health"] == tpu_v2.Node.Health.HEALTHY.value
    (op,) = _raw(emulator, f"{PARENT}/operations")["operations"][:1]
    assert op["response"]["state"] == tpu_v2.Node.State.READY.value  # inside the Any too
    names = _raw(emulator, f"{made.name}", alt="json")
    assert names["acceleratorConfig"]["type"] == "V5LITE_POD"
    assert names["state"] == "READY"
    client.delete_node(name=made.name).result(timeout=10)


def test_an_empty_reservation_name_is_unset(emulator) -> None:
    body = {
        "tpu": {
            "nodeSpec": [
                {
                    "parent": PARENT,
                    "nodeId": "q1",
                    "node": {"acceleratorType": "v5litepod-1", "runtimeVersion": RUNTIME},
                }
            ]
        },
        "reservationName": "",
    }
    op = _raw_post(emulator, f"{PARENT}/queuedResources", "q1", body)
    assert op["done"] is True and "error" not in op
    (qr,) = emulator.queued()
    assert "reservationName" not in qr
    client = _client(emulator)
    got = client.get_queued_resource(name=f"{PARENT}/queuedResources/q1")
    assert got.reservation_name == ""
    (made,) = emulator.nodes()
    assert not made["schedulingConfig"].get("reserved")  # not on a reservation
    client.delete_queued_resource(request={"name": got.name, "force": True}).result(timeout=10)


def _raw_post(emulator, path: str, qr_id: str, body: Any) -> Any:
    url = f"http://{emulator.address}/v2/{path}?queuedResourceId={qr_id}&%24alt=json"
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())


def test_the_accelerator_types_a_request_may_number_are_the_protos() -> None:
    from tpuctl.emulator.tpu import rules

    assert {t.value: t.name for t in tpu_v2.AcceleratorConfig.Type} == rules.CONFIG_TYPES
