"""What the emulator refuses as the cloud does, and how it renders what it answers
(issue 15, section 5 and the REST part of 6). Bodies go over plain HTTP, so that what
is checked is exactly what the server sends and receives."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

ZONE = "us-central1-a"
PARENT = f"projects/p/locations/{ZONE}"
V3 = {"acceleratorType": "v3-8", "runtimeVersion": "tpu-ubuntu2204-base"}


def call(emulator, method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"http://{emulator.address}{path}", data=data, method=method,
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def create(emulator, node_id: str, body: dict[str, Any], zone: str = ZONE) -> dict[str, Any]:
    status, op = call(
        emulator, "POST", f"/v2/projects/p/locations/{zone}/nodes?nodeId={node_id}", body
    )
    assert status == 200, op
    return op


def delete(emulator, name: str) -> None:
    status, _ = call(emulator, "DELETE", f"/v2/{name}")
    assert status == 200


def refused(emulator, method: str, path: str, body: Any = None) -> dict[str, Any]:
    status, answer = call(emulator, method, path, body)
    assert status == 400, answer
    assert answer["error"]["status"] == "INVALID_ARGUMENT"
    return dict(answer["error"])


# -- proto3 JSON: default values are left out --------------------------------------------
def test_responses_leave_default_values_out(emulator) -> None:
    op = create(emulator, "plain", V3)
    node = op["response"]
    assert node["schedulingConfig"] == {}  # as public `describe` output shows it
    for absent in ("labels", "tags", "metadata", "description", "dataDisks", "symptoms"):
        assert absent not in node
    assert node["networkConfig"] == {
        "network": "projects/p/global/networks/default",
        "subnetwork": "projects/p/regions/us-central1/subnetworks/default",
    }
    _, got = call(emulator, "GET", f"/v2/{node['name']}")
    assert got == {k: v for k, v in node.items() if k != "@type"}
    delete(emulator, node["name"])

    op = create(emulator, "spot", {**V3, "schedulingConfig": {"spot": True}, "labels": {"a": "b"}})
    assert op["response"]["schedulingConfig"] == {"spot": True}
    assert op["response"]["labels"] == {"a": "b"}
    delete(emulator, op["response"]["name"])


def test_the_projects_pinned_client_still_reads_every_field(emulator) -> None:
    from google.cloud import tpu_v2

    client = emulator.tpu_client()
    node = tpu_v2.Node(**{"accelerator_type": "v3-8", "runtime_version": "tpu-ubuntu2204-base"})
    made = client.create_node(parent=PARENT, node_id="pinned", node=node).result(timeout=10)
    assert not made.scheduling_config.spot and not made.scheduling_config.preemptible
    assert made.health == tpu_v2.Node.Health.HEALTHY and dict(made.labels) == {}
    client.delete_node(name=made.name).result(timeout=10)


# -- the catalogue ----------------------------------------------------------------------
def test_v2_tpuv5_litepod_is_offered_where_v5e_is(emulator) -> None:
    _, listed = call(emulator, "GET", "/v2/projects/p/locations/us-east5-b/runtimeVersions")
    versions = [v["version"] for v in listed["runtimeVersions"]]
    assert "v2-tpuv5-litepod" in versions and "v2-alpha-tpuv6e" in versions
    assert "v2-alpha-tpuv5" not in versions  # no v5p in us-east5-b
    op = create(
        emulator, "lite", {"acceleratorType": "v5litepod-4", "runtimeVersion": "v2-tpuv5-litepod"},
        zone="us-east5-b",
    )  # fmt: skip
    delete(emulator, op["response"]["name"])


def test_runtime_versions_must_fit_the_accelerator_and_the_zone(emulator) -> None:
    body = {"acceleratorType": "v3-8", "runtimeVersion": "v2-alpha-tpuv6e"}
    error = refused(emulator, "POST", f"/v2/{PARENT}/nodes?nodeId=n", body)
    assert error["message"].startswith(
        "Cloud TPU received a bad request. runtime version v2-alpha-tpuv6e was not found in "
        "zone us-central1-a [EID: 0x"
    )
    error = refused(emulator, "POST", "/v2/projects/p/locations/us-central1-b/nodes?nodeId=n", body)
    assert error["message"].startswith(
        "Cloud TPU received a bad request. runtime version v2-alpha-tpuv6e is not supported "
        "for accelerator type v3-8 [EID: 0x"
    )
    _, listed = call(emulator, "GET", f"/v2/{PARENT}/runtimeVersions")
    assert "v2-alpha-tpuv6e" not in [v["version"] for v in listed["runtimeVersions"]]
    assert emulator.nodes() == []


# -- refusals ------------------------------------------------------------------------------
def test_unknown_json_fields_are_refused_as_googles_front_end_does(emulator) -> None:
    error = refused(emulator, "POST", f"/v2/{PARENT}/nodes?nodeId=n", {**V3, "x": 1})
    assert error["message"] == (
        "Invalid JSON payload received. Unknown name \"x\" at 'node': Cannot find field."
    )
    assert error["details"] == [
        {
            "@type": "type.googleapis.com/google.rpc.BadRequest",
            "fieldViolations": [{"field": "node", "description": error["message"]}],
        }
    ]
    nested = {**V3, "schedulingConfig": {"spott": True}, "dataDisks": [{"disk": "d"}]}
    error = refused(emulator, "POST", f"/v2/{PARENT}/nodes?nodeId=n", nested)
    assert error["message"].splitlines() == [
        "Invalid JSON payload received. Unknown name \"spott\" at 'node.scheduling_config': "
        "Cannot find field.",
        "Invalid JSON payload received. Unknown name \"disk\" at 'node.data_disks[0]': "
        "Cannot find field.",
    ]
    # snake_case names are proto JSON too, and pass
    snake = {"accelerator_type": "v3-8", "runtime_version": "tpu-ubuntu2204-base"}
    delete(emulator, create(emulator, "snake", snake)["response"]["name"])

    spec = {"parent": PARENT, "nodeId": "q", "node": {**V3, "foo": "bar"}}
    error = refused(
        emulator, "POST", f"/v2/{PARENT}/queuedResources?queuedResourceId=q",
        {"tpu": {"nodeSpec": [spec]}},
    )  # fmt: skip
    assert error["message"] == (
        'Invalid JSON payload received. Unknown name "foo" at '
        "'queued_resource.tpu.node_spec[0].node': Cannot find field."
    )
    made = create(emulator, "ga", V3)["response"]
    error = refused(emulator, "POST", f"/v2/{made['name']}:getGuestAttributes", {"path": "x/"})
    assert error["message"] == (
        'Invalid JSON payload received. Unknown name "path": Cannot find field.'
    )
    error = refused(emulator, "POST", f"/v2/{made['name']}:stop", {"force": True})
    assert 'Unknown name "force"' in error["message"]
    patch = f"/v2/{made['name']}?updateMask=labels"
    assert 'Unknown name "labelz"' in refused(emulator, "PATCH", patch, {"labelz": {}})["message"]
    delete(emulator, made["name"])


def test_discovery_client_bodies_with_unknown_fields_are_refused(emulator) -> None:
    from googleapiclient.errors import HttpError

    nodes = emulator.discovery_client().projects().locations().nodes()
    with pytest.raises(HttpError) as exc:
        nodes.create(parent=PARENT, nodeId="n", body={**V3, "acceleratorTyp": "v3-8"}).execute()
    assert exc.value.status_code == 400
    assert "Unknown name \"acceleratorTyp\" at 'node'" in str(exc.value)


@pytest.mark.parametrize(
    ("extra", "wording"),
    [
        ({"schedulingConfig": {"spot": True, "preemptible": True}}, "both spot and preemptible"),
        (
            {"acceleratorConfig": {"type": "V3", "topology": "2x2"}},
            "acceleratorType and acceleratorConfig cannot both be set",
        ),
    ],
)
def test_fields_that_exclude_each_other(emulator, extra: dict[str, Any], wording: str) -> None:
    error = refused(emulator, "POST", f"/v2/{PARENT}/nodes?nodeId=n", {**V3, **extra})
    assert error["message"].startswith("Cloud TPU received a bad request. ")
    assert wording in error["message"]
    assert emulator.nodes() == []


def test_a_preempted_node_cannot_be_updated(emulator) -> None:
    made = create(emulator, "s", {**V3, "schedulingConfig": {"spot": True}})["response"]
    emulator.preempt(made["name"])
    error = refused(emulator, "PATCH", f"/v2/{made['name']}?updateMask=labels", {"labels": {}})
    assert "update is not supported while in state PREEMPTED" in error["message"]
    delete(emulator, made["name"])


def test_a_start_without_capacity_fails_with_code_8_and_the_node_stays_stopped(emulator) -> None:
    made = create(emulator, "vm", V3)["response"]
    _, stopping = call(emulator, "POST", f"/v2/{made['name']}:stop", {})
    assert stopping["done"] and stopping["response"]["state"] == "STOPPED"
    emulator.capacity({ZONE: {"v3": 4}})  # one v3-8
    other = create(emulator, "other", V3)  # the stopped node gave its chips back
    assert other["response"]["state"] == "READY"
    status, op = call(emulator, "POST", f"/v2/{made['name']}:start", {})
    assert status == 200 and op["done"]
    assert op["error"]["code"] == 8
    assert op["error"]["message"].startswith(f'There is no more capacity in the zone "{ZONE}"')
    _, node = call(emulator, "GET", f"/v2/{made['name']}")
    assert node["state"] == "STOPPED"
    delete(emulator, other["response"]["name"])
    _, op = call(emulator, "POST", f"/v2/{made['name']}:start", {})
    assert op["response"]["state"] == "READY"
    delete(emulator, made["name"])


def test_a_client_older_than_spot_parses_what_is_answered(emulator) -> None:
    """google-cloud-tpu 1.19.1 (pinned by Google's tpu/ samples) has a SchedulingConfig
    without `spot`, and its REST transport parses strictly: an answer carrying `"spot":
    false` fails every operation poll with `SchedulingConfig has no field named "spot"`.
    Its message, rebuilt here, parses what the emulator answers."""
    from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

    file = descriptor_pb2.FileDescriptorProto(name="old_tpu.proto", package="old", syntax="proto3")
    message = file.message_type.add(name="SchedulingConfig")
    for number, name in enumerate(("preemptible", "reserved"), start=1):
        message.field.add(name=name, number=number, type=8, label=1)  # optional bool
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    old = message_factory.GetMessageClass(pool.FindMessageTypeByName("old.SchedulingConfig"))
    op = create(emulator, "old", V3)
    json_format.ParseDict(op["response"]["schedulingConfig"], old())
    with pytest.raises(json_format.ParseError, match='has no field named "spot"'):
        json_format.ParseDict({"preemptible": False, "spot": False, "reserved": False}, old())
    delete(emulator, op["response"]["name"])
