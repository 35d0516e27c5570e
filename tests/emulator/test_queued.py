"""Queued resources through google-cloud-tpu's REST client: states, capacity, expiry, delete."""

from __future__ import annotations

import pytest
from google.api_core import exceptions as gx
from google.cloud import tpu_v2

from tpuctl.catalog import runtime_for

PROJECT = "p"
ZONE = "us-central1-a"
PARENT = f"projects/{PROJECT}/locations/{ZONE}"
State = tpu_v2.QueuedResourceState.State


def request(node_id: str, accelerator: str = "v3-8", **fields) -> tpu_v2.QueuedResource:
    node = tpu_v2.Node(
        accelerator_type=accelerator,
        runtime_version=runtime_for(accelerator),
        labels={"team": "ml"},
    )
    spec = tpu_v2.QueuedResource.Tpu.NodeSpec(parent=PARENT, node_id=node_id, node=node)
    return tpu_v2.QueuedResource(tpu=tpu_v2.QueuedResource.Tpu(node_spec=[spec]), **fields)


def create(client, qr_id: str, **fields) -> tpu_v2.QueuedResource:
    op = client.create_queued_resource(
        parent=PARENT, queued_resource_id=qr_id, queued_resource=request(qr_id, **fields)
    )
    return op.result(timeout=10)


def get(client, qr_id: str) -> tpu_v2.QueuedResource:
    return client.get_queued_resource(name=f"{PARENT}/queuedResources/{qr_id}")


def force_delete(client, qr_id: str) -> None:
    client.delete_queued_resource(
        request={"name": f"{PARENT}/queuedResources/{qr_id}", "force": True}
    ).result(timeout=10)


def test_a_request_is_provisioned_into_a_labelled_node(emulator) -> None:
    client = emulator.tpu_client()
    qr = create(client, "q1", spot=tpu_v2.QueuedResource.Spot())
    assert qr.name == f"{PARENT}/queuedResources/q1"
    assert get(client, "q1").state.state == State.ACTIVE
    node = client.get_node(name=f"{PARENT}/nodes/q1")
    assert node.state == tpu_v2.Node.State.READY
    assert node.queued_resource == f"{PARENT}/queuedResources/q1"
    assert node.labels["team"] == "ml"
    assert node.scheduling_config.spot
    listed = client.list_queued_resources(parent="projects/p/locations/-")
    assert [q.name for q in listed] == [qr.name]
    with pytest.raises(gx.BadRequest):  # ACTIVE with a node: only force deletes it
        client.delete_queued_resource(name=qr.name).result(timeout=10)
    force_delete(client, "q1")
    with pytest.raises(gx.NotFound):
        get(client, "q1")
    assert emulator.nodes() == []


def test_states_step_by_step_when_held(emulator) -> None:
    emulator.durations(queued_accept=None, queued_schedule=None, create=None)
    client = emulator.tpu_client()
    assert create(client, "q2").state.state == State.CREATING
    emulator.advance()
    assert get(client, "q2").state.state == State.ACCEPTED
    emulator.advance()  # scheduled: its node is being created
    assert get(client, "q2").state.state == State.PROVISIONING
    assert [n["state"] for n in emulator.nodes()] == ["CREATING"]
    emulator.advance()
    assert get(client, "q2").state.state == State.ACTIVE
    force_delete(client, "q2")


def test_a_request_waits_for_capacity_and_gets_it_when_a_node_goes(emulator) -> None:
    emulator.capacity({ZONE: {"v3": 4}})  # one v3-8
    client = emulator.tpu_client()
    create(client, "first")
    assert get(client, "first").state.state == State.ACTIVE
    create(client, "second")
    assert get(client, "second").state.state == State.WAITING_FOR_RESOURCES
    assert [n["name"].rsplit("/", 1)[-1] for n in emulator.nodes()] == ["first"]
    # Without force an ACCEPTED/FAILED/SUSPENDED request or one without nodes may go:
    # "first" is ACTIVE with a node, so delete its node (the request is then SUSPENDED).
    client.delete_node(name=f"{PARENT}/nodes/first").result(timeout=10)
    assert get(client, "first").state.state == State.SUSPENDED
    assert get(client, "second").state.state == State.ACTIVE
    client.delete_queued_resource(name=f"{PARENT}/queuedResources/first").result(timeout=10)
    force_delete(client, "second")
    assert emulator.queued() == [] and emulator.nodes() == []


def test_validity_running_out_fails_the_request(emulator) -> None:
    emulator.capacity({ZONE: {"v3": 0}})
    client = emulator.tpu_client()
    policy = tpu_v2.QueuedResource.QueueingPolicy(valid_until_time="2000-01-01T00:00:00Z")
    create(client, "late", queueing_policy=policy)
    qr = get(client, "late")
    assert qr.state.state == State.FAILED
    assert "validity ran out" in qr.state.failed_data.error.message
    client.delete_queued_resource(name=qr.name).result(timeout=10)  # FAILED: no force needed
    assert emulator.queued() == []


def test_the_control_plane_fails_or_provisions_a_request(emulator) -> None:
    emulator.capacity({ZONE: {"v3": 0}})
    client = emulator.tpu_client()
    create(client, "doomed")
    create(client, "lucky", queueing_policy={"valid_until_duration": "3600s"})
    emulator.fail_queued(f"{PARENT}/queuedResources/doomed", "stockout in the zone")
    failed = get(client, "doomed")
    assert failed.state.state == State.FAILED
    assert failed.state.failed_data.error.message == "stockout in the zone"
    emulator.provision_queued(f"{PARENT}/queuedResources/lucky")
    assert get(client, "lucky").state.state == State.ACTIVE
    force_delete(client, "doomed")
    force_delete(client, "lucky")


def test_a_node_name_taken_is_refused(emulator) -> None:
    client = emulator.tpu_client()
    create(client, "taken")
    with pytest.raises(gx.Conflict):
        create(client, "taken")
    with pytest.raises(gx.BadRequest):
        client.create_queued_resource(
            parent=PARENT, queued_resource_id="bad", queued_resource=tpu_v2.QueuedResource()
        )
    force_delete(client, "taken")


def test_requests_survive_a_restart(tmp_path) -> None:
    from tpuctl.emulator.services import Backend
    from tpuctl.emulator.tpu.front import TpuFront

    body = {
        "tpu": {
            "nodeSpec": [
                {
                    "parent": PARENT,
                    "nodeId": "kept",
                    "node": {"acceleratorType": "v3-8", "runtimeVersion": "tpu-vm-base"},
                }
            ]
        }
    }
    first = Backend(tmp_path)
    first.update_config({"durations": {"queued_accept": None}})
    TpuFront(first).create_queued_resource(PROJECT, ZONE, "kept", body)
    first.close()
    again = Backend(tmp_path)
    tpu = TpuFront(again)
    assert tpu.get_queued_resource(PROJECT, ZONE, "kept")["state"]["state"] == "CREATING"
    again.advance()
    assert tpu.get_queued_resource(PROJECT, ZONE, "kept")["state"]["state"] == "ACCEPTED"
    again.close()


def test_a_preempted_node_suspends_its_request(emulator) -> None:
    client = emulator.tpu_client()
    create(client, "spotty", spot=tpu_v2.QueuedResource.Spot())
    emulator.preempt(f"{PARENT}/nodes/spotty")
    qr = get(client, "spotty")
    assert qr.state.state == State.SUSPENDED
    assert qr.state.state_initiator == tpu_v2.QueuedResourceState.StateInitiator.SERVICE
    # SUSPENDED: a delete without force is accepted, and takes the node with it
    client.delete_queued_resource(name=qr.name).result(timeout=10)
    assert emulator.queued() == [] and emulator.nodes() == []


def multislice(count: int, prefix: str | None = None, **spec) -> tpu_v2.QueuedResource:
    """A multislice request, as gcloud's --node-count/--node-prefix send it."""
    params = tpu_v2.QueuedResource.Tpu.NodeSpec.MultisliceParams(
        node_count=count, **({"node_id_prefix": prefix} if prefix else {})
    )
    node = tpu_v2.Node(accelerator_type="v3-8", runtime_version=runtime_for("v3-8"))
    node_spec = tpu_v2.QueuedResource.Tpu.NodeSpec(
        parent=PARENT, node=node, multislice_params=params, **spec
    )
    return tpu_v2.QueuedResource(tpu=tpu_v2.QueuedResource.Tpu(node_spec=[node_spec]))


def create_multislice(client, qr_id: str, request: tpu_v2.QueuedResource, **fields) -> None:
    for key, value in fields.items():
        setattr(request, key, value)
    client.create_queued_resource(
        parent=PARENT, queued_resource_id=qr_id, queued_resource=request
    ).result(timeout=10)


def test_a_multislice_request_makes_its_slices_together_and_deletes_them_together(
    emulator,
) -> None:
    emulator.durations(queued_accept=None, queued_schedule=None, create=None)
    client = emulator.tpu_client()
    create_multislice(client, "ms", multislice(2, "ms"))
    emulator.advance()
    emulator.advance()  # PROVISIONING: both slices are being created
    assert get(client, "ms").state.state == State.PROVISIONING
    nodes = {n.name.rsplit("/", 1)[-1]: n for n in client.list_nodes(parent=PARENT)}
    assert sorted(nodes) == ["ms-0", "ms-1"]
    for node in nodes.values():
        assert node.multislice_node is True
        assert node.queued_resource == f"{PARENT}/queuedResources/ms"
    # each slice is a node with workers of its own
    addresses = [e.ip_address for n in nodes.values() for e in n.network_endpoints]
    assert len(set(addresses)) == 2
    emulator.advance()
    assert get(client, "ms").state.state == State.ACTIVE
    assert {n["state"] for n in emulator.nodes()} == {"READY"}
    force_delete(client, "ms")
    assert emulator.queued() == [] and emulator.nodes() == []


def test_a_multislice_request_without_a_prefix_names_its_nodes_after_itself(emulator) -> None:
    client = emulator.tpu_client()
    create_multislice(client, "pod", multislice(3))
    assert get(client, "pod").state.state == State.ACTIVE
    assert sorted(n["name"].rsplit("/", 1)[-1] for n in emulator.nodes()) == [
        "pod-0", "pod-1", "pod-2",
    ]  # fmt: skip
    force_delete(client, "pod")


@pytest.mark.parametrize(
    ("count", "extra", "needle"),
    [(1, {}, "needs to be > 1"), (2, {"nodeId": "x"}, "mutually exclusive")],
)
def test_a_multislice_request_the_api_refuses(emulator, count, extra, needle) -> None:
    """As JSON through the discovery client: the proto's `name_strategy` oneof keeps
    google-cloud-tpu from sending both a nodeId and multisliceParams."""
    from googleapiclient.errors import HttpError

    node = {"acceleratorType": "v3-8", "runtimeVersion": runtime_for("v3-8")}
    spec = {"parent": PARENT, "node": node, "multisliceParams": {"nodeCount": count}, **extra}
    queued = emulator.discovery_client().projects().locations().queuedResources()
    call = queued.create(parent=PARENT, queuedResourceId="bad", body={"tpu": {"nodeSpec": [spec]}})
    with pytest.raises(HttpError) as info:
        call.execute()
    assert info.value.resp.status == 400 and needle in str(info.value)
    assert emulator.queued() == [] and emulator.nodes() == []


def test_a_multislice_past_its_quota_is_refused_at_once_whatever_its_count(emulator) -> None:
    """100000 v3-8 slices held the emulator's lock for minutes while it built every node
    (and compared each name with all the others): a request whose slices together exceed a
    quota's limit is refused by the create, with the quota's own 429, before any is built."""
    import time

    from googleapiclient.errors import HttpError

    emulator.quotas({"TPUV3sPerProjectPerZoneForTPUAPI": {ZONE: 32}})
    node = {"acceleratorType": "v3-8", "runtimeVersion": runtime_for("v3-8")}
    queued = emulator.discovery_client().projects().locations().queuedResources()
    for count in (5, 100000):  # 5 x 8 cores > 32
        spec = {"parent": PARENT, "node": node, "multisliceParams": {"nodeCount": count}}
        call = queued.create(
            parent=PARENT, queuedResourceId="big", body={"tpu": {"nodeSpec": [spec]}}
        )
        began = time.monotonic()
        with pytest.raises(HttpError) as info:
            call.execute()
        assert time.monotonic() - began < 10  # the old code took minutes
        assert info.value.resp.status == 429
        assert "Quota limit 'TPUV3sPerProjectPerZoneForTPUAPI' has been exceeded" in str(info.value)
        assert emulator.queued() == [] and emulator.nodes() == []
    client = emulator.tpu_client()  # 4 slices fit
    create_multislice(client, "fits", multislice(4))
    assert get(client, "fits").state.state == State.ACTIVE
    force_delete(client, "fits")


def test_one_preempted_slice_suspends_the_whole_request(emulator) -> None:
    client = emulator.tpu_client()
    create_multislice(client, "ms", multislice(2, "ms"), spot=tpu_v2.QueuedResource.Spot())
    assert get(client, "ms").state.state == State.ACTIVE
    emulator.preempt(f"{PARENT}/nodes/ms-1")
    assert get(client, "ms").state.state == State.SUSPENDED
    client.delete_queued_resource(name=f"{PARENT}/queuedResources/ms").result(timeout=10)
    assert emulator.queued() == [] and emulator.nodes() == []
