"""A retried create adopts only what this client asked for, never another's of that name."""

from __future__ import annotations

import pytest
from google.cloud import tpu_v2

from tpuctl import catalog
from tpuctl.cloud.clients import ClientFactory
from tpuctl.errors import AlreadyExistsError
from tpuctl.models import CreateSpec, QueueSpec
from tpuctl.services import node_create, queued

ZONE = "us-central1-a"
PARENT = f"projects/tpuctl-demo/locations/{ZONE}"


def _ours(name: str) -> CreateSpec:
    spec = CreateSpec(name, catalog.shape("v3-8"), version="tpu-ubuntu2204-base", owner="me")
    return node_create.prepare(spec)


def _theirs(emulator, name: str) -> None:
    """Another client's request of the same name, made between our two attempts."""
    node = tpu_v2.Node(accelerator_type="v3-8", runtime_version="tpu-ubuntu2204-base",
                       labels={"owner": "someone-else"})  # fmt: skip
    request = tpu_v2.QueuedResource(
        tpu=tpu_v2.QueuedResource.Tpu(
            node_spec=[tpu_v2.QueuedResource.Tpu.NodeSpec(parent=PARENT, node_id=name, node=node)]
        )
    )
    emulator.tpu_client().create_queued_resource(
        parent=PARENT, queued_resource_id=name, queued_resource=request
    ).result(timeout=10)


def test_a_retry_meeting_another_clients_request_is_a_conflict(emulator) -> None:
    _theirs(emulator, "shared")
    # Our first attempt fails before it takes effect; the retry meets theirs (409).
    emulator.faults(rate=1.0, codes=[503], after_rate=0.0, paths=r"queuedResources\?", count=1)
    api = ClientFactory().tpu()
    with pytest.raises(AlreadyExistsError):
        api.create_queued_resource(PARENT, "shared", _ours("shared"), QueueSpec())
    emulator.faults()
    (left,) = emulator.queued()  # theirs, untouched
    assert left["tpu"]["nodeSpec"][0]["node"]["labels"] == {"owner": "someone-else"}
    assert emulator.requests()["POST queuedResources.create"] == 3  # theirs, ours twice
    queued.delete_request(api, f"{PARENT}/queuedResources/shared")


def test_a_retry_meeting_its_own_lost_request_adopts_it(emulator) -> None:
    # Our first attempt takes effect but its answer is lost: the retry's 409 is ours.
    emulator.faults(rate=1.0, codes=[503], after_rate=1.0, paths=r"queuedResources\?")
    api = ClientFactory().tpu()
    assert api.create_queued_resource(PARENT, "mine", _ours("mine"), QueueSpec()) is None
    emulator.faults()
    assert [q["name"].rsplit("/", 1)[-1] for q in emulator.queued()] == ["mine"]
    queued.delete_request(api, f"{PARENT}/queuedResources/mine")
