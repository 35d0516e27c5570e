"""The control plane's log of request bodies, and queued resources on a reservation."""

from __future__ import annotations

import urllib.request

import pytest
from google.api_core import exceptions as gx
from google.cloud import tpu_v2

from tpuctl.emulator.control.client import CONTROL_PREFIX
from tpuctl.emulator.core.requests import BODY_LOG_SIZE

PARENT = "projects/p/locations/us-central1-a"


def _node(acc: str = "v3-8") -> tpu_v2.Node:
    return tpu_v2.Node(accelerator_type=acc, runtime_version="tpu-vm-base")


def test_bodies_are_logged_filtered_bounded_and_cleared(emulator) -> None:
    client = emulator.tpu_client()
    node = tpu_v2.Node(
        accelerator_type="v3-8", runtime_version="tpu-vm-base", labels={"team": "ml"}
    )
    client.create_node(parent=PARENT, node_id="n1", node=node).result()
    client.get_node(name=f"{PARENT}/nodes/n1")  # a read without a body: not logged
    (entry,) = emulator.bodies("create")
    assert entry["verb"] == "create" and entry["method"] == "POST"
    assert entry["path"] == f"/v2/{PARENT}/nodes" and entry["query"]["nodeId"] == "n1"
    assert entry["body"]["labels"] == {"team": "ml"}
    assert emulator.bodies("patch") == []
    assert [e["verb"] for e in emulator.bodies()] == ["create"]
    url = f"http://{emulator.address}{CONTROL_PREFIX}requests/bodies?method=create"
    with urllib.request.urlopen(url, timeout=5) as answer:  # the plain HTTP form
        assert b'"nodeId": "n1"' in answer.read()
    client.delete_node(name=f"{PARENT}/nodes/n1").result()
    for i in range(BODY_LOG_SIZE + 5):  # refused creates are logged too; the log is bounded
        with pytest.raises(gx.BadRequest):
            client.create_node(parent=PARENT, node_id=f"x{i}", node=_node("v9-8"))
    kept = emulator.bodies("create")
    assert len(kept) == BODY_LOG_SIZE and kept[-1]["query"]["nodeId"] == f"x{BODY_LOG_SIZE + 4}"
    emulator.reset()
    assert emulator.bodies() == []


def _queued(client, qr_id: str, **extra) -> tpu_v2.QueuedResource:
    qr = tpu_v2.QueuedResource(
        tpu=tpu_v2.QueuedResource.Tpu(
            node_spec=[
                tpu_v2.QueuedResource.Tpu.NodeSpec(parent=PARENT, node_id=qr_id, node=_node())
            ]
        ),
        **extra,
    )
    return client.create_queued_resource(
        parent=PARENT, queued_resource_id=qr_id, queued_resource=qr
    ).result(timeout=10)


def test_a_reservation_as_gcloud_names_it(emulator) -> None:
    emulator.quotas({"TPUV3sPerProjectPerZoneForTPUAPI": 0})  # no on-demand quota at all
    client = emulator.tpu_client()
    _queued(client, "r1", reservation_name=f"{PARENT}/reservations/-")
    (node,) = emulator.nodes()
    assert node["schedulingConfig"] == {"reserved": True}  # on the reservation: no quota
    for bad, words in (
        ("projects/p/reservations/-", "Invalid value for field 'reservationName'"),
        ("projects/p/locations/us-east5-a/reservations/-", "not in the queued resource's zone"),
    ):
        with pytest.raises(gx.BadRequest, match=words):
            _queued(client, "r2", reservation_name=bad)
    emulator.durations(delete=0)
    name = f"{PARENT}/queuedResources/r1"
    client.delete_queued_resource(request={"name": name, "force": True}).result(timeout=10)
    assert emulator.queued() == [] and emulator.nodes() == []
