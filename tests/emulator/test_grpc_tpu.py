"""google-cloud-tpu against the emulator over its default transport, gRPC, and over REST:
the same scenarios through both (`tpuctl/emulator/tpu_grpc.py`), and the v2alpha1 client
(gRPC only) for queued resources, as Google's `tpu/` samples drive them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.api_core import exceptions
from google.cloud import tpu_v2, tpu_v2alpha1
from google.protobuf import field_mask_pb2

from tpuctl.catalog import runtime_for
from tpuctl.emulator.core.server import EmulatorServer
from tpuctl.waiting import poll_until

PROJECT = "p"
ZONE = "us-central1-a"
PARENT = f"projects/{PROJECT}/locations/{ZONE}"
EID = re.compile(r" \[EID: 0x[0-9a-f]+\]")


def grpc_client(module: Any, endpoint: str) -> Any:
    """`module.TpuClient` on its default transport, gRPC, over an unencrypted channel (the
    snippet of docs/emulator.md)."""
    transport = module.services.tpu.transports.TpuGrpcTransport(
        channel=grpc.insecure_channel(endpoint)
    )
    return module.TpuClient(transport=transport)


@pytest.fixture(params=["grpc", "rest"])
def client(request: pytest.FixtureRequest, emulator) -> Iterator[Any]:
    if request.param == "grpc":
        made = grpc_client(tpu_v2, emulator.status()["tpu_grpc_endpoint"])
        # the transport TpuClient() picks when given none
        assert type(made.transport) is tpu_v2.TpuClient.get_transport_class()
    else:
        made = emulator.tpu_client()
        assert made.transport.kind == "rest"
    yield made
    made.transport.close()


@pytest.fixture
def alpha(emulator) -> Iterator[Any]:
    made = grpc_client(tpu_v2alpha1, emulator.status()["tpu_grpc_endpoint"])
    yield made
    made.transport.close()


def message(exc: exceptions.GoogleAPICallError) -> str:
    """The service's message: REST prefixes it with the request (`GET http://...: `)."""
    return EID.sub(
        "", str(exc.message).split(": ", 1)[-1] if "http://" in exc.message else exc.message
    )


def create(client: Any, node_id: str, accelerator: str = "v3-8", **fields: Any) -> Any:
    node = tpu_v2.Node(
        accelerator_type=accelerator, runtime_version=runtime_for(accelerator), **fields
    )
    return client.create_node(parent=PARENT, node_id=node_id, node=node).result(timeout=10)


def test_a_node_is_created_read_stopped_started_updated_and_deleted(client) -> None:
    node = create(client, "n1", labels={"team": "ml"}, description="first")
    assert node.name == f"{PARENT}/nodes/n1"
    assert node.state == tpu_v2.Node.State.READY
    assert node.accelerator_config.type_ == tpu_v2.AcceleratorConfig.Type.V3
    assert dict(node.labels) == {"team": "ml"}
    got = client.get_node(name=node.name)
    assert (got.id, got.create_time) == (node.id, node.create_time)
    assert [n.name for n in client.list_nodes(parent=PARENT)] == [node.name]
    stopped = client.stop_node(request={"name": node.name}).result(timeout=10)
    assert stopped.state == tpu_v2.Node.State.STOPPED
    started = client.start_node(request={"name": node.name}).result(timeout=10)
    assert started.state == tpu_v2.Node.State.READY
    mask = field_mask_pb2.FieldMask(paths=["labels"])
    changed = client.update_node(
        node=tpu_v2.Node(name=node.name, labels={"x": "y"}), update_mask=mask
    )
    assert dict(changed.result(timeout=10).labels) == {"x": "y"}
    assert client.get_node(name=node.name).description == "first"  # outside the mask
    attributes = client.get_guest_attributes(request={"name": node.name})
    assert len(attributes.guest_attributes) == 1  # one worker
    ops = client.list_operations(request={"name": PARENT}).operations
    assert all(op.name.startswith(f"{PARENT}/operations/") for op in ops)
    assert len(ops) == 4 and all(op.done for op in ops)  # create, stop, start, update
    client.delete_node(name=node.name).result(timeout=10)
    assert list(client.list_nodes(parent=PARENT)) == []


def test_the_catalogue_and_locations(client) -> None:
    types = {t.type_ for t in client.list_accelerator_types(parent=PARENT)}
    assert "v3-8" in types
    one = client.get_accelerator_type(name=f"{PARENT}/acceleratorTypes/v3-8")
    assert one.accelerator_configs[0].topology == "2x2"
    versions = {v.version for v in client.list_runtime_versions(parent=PARENT)}
    assert runtime_for("v3-8") in versions
    name = f"{PARENT}/runtimeVersions/{runtime_for('v3-8')}"
    assert client.get_runtime_version(name=name).version == runtime_for("v3-8")
    location = client.get_location(request={"name": PARENT})
    assert location.location_id == ZONE
    listed = client.list_locations(request={"name": f"projects/{PROJECT}"})
    assert ZONE in {loc.location_id for loc in listed.locations}


def test_errors_carry_the_status_message_and_details_of_rest(client) -> None:
    # REST errors are classed by HTTP status (400 BadRequest, 403 Forbidden), gRPC ones by
    # code (InvalidArgument, PermissionDenied: subclasses of those)
    name = f"{PARENT}/nodes/missing"
    with pytest.raises(exceptions.NotFound) as missing:
        client.get_node(name=name)
    assert message(missing.value) == f"Resource '{name}' was not found"
    (info,) = missing.value.details
    assert (info.resource_name if hasattr(info, "resource_name") else info["resourceName"]) == name
    with pytest.raises(exceptions.BadRequest) as bad:
        node = tpu_v2.Node(accelerator_type="v3-8", runtime_version="v2-alpha-tpuv6e")
        client.create_node(parent=PARENT, node_id="bad", node=node)
    assert message(bad.value) == (
        "Cloud TPU received a bad request. runtime version v2-alpha-tpuv6e was not found "
        f"in zone {ZONE}"
    )
    node = create(client, "m1")
    try:
        for paths, said in (
            (["accelerator_type"], "Invalid update mask path 'accelerator_type': the fields"),
            ([], "The updateMask parameter is required."),
        ):
            mask = field_mask_pb2.FieldMask(paths=paths)
            with pytest.raises(exceptions.BadRequest) as refused:
                client.update_node(node=tpu_v2.Node(name=node.name), update_mask=mask)
            assert message(refused.value).startswith(said)
    finally:
        client.delete_node(name=node.name).result(timeout=10)


def test_a_bad_request_says_the_same_over_both_transports(emulator) -> None:
    """Message for message: REST and gRPC answer one invalid request alike."""
    rest = emulator.tpu_client()
    over_grpc = grpc_client(tpu_v2, emulator.status()["tpu_grpc_endpoint"])
    answers = []
    for made, kind in ((rest, exceptions.BadRequest), (over_grpc, exceptions.InvalidArgument)):
        node = tpu_v2.Node(accelerator_type="v3-8", runtime_version="v2-alpha-tpuv6e")
        with pytest.raises(kind) as bad:
            made.create_node(parent=PARENT, node_id="bad", node=node)
        answers.append(message(bad.value))
    over_grpc.transport.close()
    assert answers[0] == answers[1]


def test_the_access_gate_applies_to_both(client, emulator) -> None:
    emulator.config(denied_permissions=["tpu.nodes.list"])
    with pytest.raises(exceptions.Forbidden) as denied:
        list(client.list_nodes(parent=PARENT))
    assert denied.value.reason == "IAM_PERMISSION_DENIED"
    assert message(denied.value) == f"Permission 'tpu.nodes.list' denied on '{PARENT}/nodes'"
    emulator.config(denied_permissions=[], services={"tpu.googleapis.com": False})
    with pytest.raises(exceptions.Forbidden) as disabled:
        client.get_node(name=f"{PARENT}/nodes/n")
    assert disabled.value.reason == "SERVICE_DISABLED"


def test_queued_resources_through_v2(client, emulator) -> None:
    spec = tpu_v2.QueuedResource.Tpu.NodeSpec(
        parent=PARENT,
        node_id="q1",
        node=tpu_v2.Node(accelerator_type="v3-8", runtime_version=runtime_for("v3-8")),
    )
    request = tpu_v2.QueuedResource(tpu=tpu_v2.QueuedResource.Tpu(node_spec=[spec]), spot={})
    made = client.create_queued_resource(
        parent=PARENT, queued_resource_id="q1", queued_resource=request
    ).result(timeout=10)
    assert made.name == f"{PARENT}/queuedResources/q1"
    active = wait_active(lambda: client.get_queued_resource(name=made.name))
    assert active.tpu.node_spec[0].node_id == "q1"
    assert [q.name for q in client.list_queued_resources(parent=PARENT)] == [made.name]
    client.delete_queued_resource(request={"name": made.name, "force": True}).result(timeout=10)
    assert emulator.queued() == [] and emulator.nodes() == []


def wait_active(get: Any) -> Any:
    def check() -> tuple[Any, str]:
        qr = get()
        return (qr if qr.state.state.name == "ACTIVE" else None), qr.state.state.name

    return poll_until(check, what="the queued resource to be ACTIVE", timeout=15, poll=0.05)


def test_queued_resources_through_the_v2alpha1_client(alpha, emulator) -> None:
    """As Google's `tpu/queued_resources_*.py` samples do, on the emulator's clock."""
    emulator.durations(queued_accept=0.2, queued_schedule=0.2, create=0.3)
    node = tpu_v2alpha1.Node(accelerator_type="v5litepod-4", runtime_version="v2-tpuv5-litepod")
    spec = tpu_v2alpha1.QueuedResource.Tpu.NodeSpec(parent=PARENT, node_id="a1", node=node)
    request = tpu_v2alpha1.CreateQueuedResourceRequest(
        parent=PARENT,
        queued_resource_id="a1",
        queued_resource=tpu_v2alpha1.QueuedResource(
            tpu=tpu_v2alpha1.QueuedResource.Tpu(node_spec=[spec]),
            spot=tpu_v2alpha1.QueuedResource.Spot(),
        ),
    )
    made = alpha.create_queued_resource(request=request).result(timeout=10)
    assert isinstance(made, tpu_v2alpha1.QueuedResource)
    assert made.state.state.name in ("CREATING", "ACCEPTED", "WAITING_FOR_RESOURCES")
    active = wait_active(lambda: alpha.get_queued_resource(name=made.name))
    assert active.tpu.node_spec[0].node.accelerator_type == "v5litepod-4"
    assert [q.name for q in alpha.list_queued_resources(parent=PARENT)] == [made.name]
    with pytest.raises(exceptions.BadRequest):  # ACTIVE: only with force (FAILED_PRECONDITION)
        alpha.delete_queued_resource(name=made.name)
    # v2alpha1 declares a QueuedResource as the delete's result, the service answers
    # Empty: Google's own sample (tpu/queued_resources_delete.py) catches the TypeError
    # this raises and reports the deletion as done
    with pytest.raises(TypeError, match="google.protobuf.Empty"):
        alpha.delete_queued_resource(request={"name": made.name, "force": True}).result(10)
    # the operations v2alpha1 started read back in its types, through the mixin too
    ops = alpha.list_operations(request={"name": PARENT}).operations
    mine = [op for op in ops if op.metadata.type_url.endswith("v2alpha1.OperationMetadata")]
    assert len(mine) == 2  # the request's create and delete (its node's ops stay v2's)
    again = alpha.get_operation(request={"name": mine[0].name})
    assert again.metadata.type_url == mine[0].metadata.type_url
    poll_until(
        lambda: (True if not emulator.queued() and not emulator.nodes() else None, "deleting"),
        what="the request and its node to go",
        timeout=15,
        poll=0.05,
    )


def test_v2alpha1_fields_v2_lacks_are_refused(alpha) -> None:
    request = tpu_v2alpha1.QueuedResource(best_effort=tpu_v2alpha1.QueuedResource.BestEffort())
    with pytest.raises(exceptions.InvalidArgument) as refused:
        alpha.create_queued_resource(parent=PARENT, queued_resource_id="b", queued_resource=request)
    assert "bestEffort" in refused.value.message


def test_a_malformed_name_and_an_unserved_method(emulator) -> None:
    client = grpc_client(tpu_v2, emulator.status()["tpu_grpc_endpoint"])
    try:
        with pytest.raises(
            exceptions.InvalidArgument, match="projects/\\*/locations/\\*/nodes/\\*"
        ):
            client.get_node(name="bogus")
        with pytest.raises(exceptions.MethodNotImplemented):
            client.generate_service_identity(request={"parent": PARENT})
    finally:
        client.transport.close()


def test_the_grpc_port_is_kept_over_a_restart(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = EmulatorServer(port=0, state_dir=state, ssh=False).start()
    try:
        before = first.backend.tpu_grpc_endpoint
    finally:
        first.stop()
    again = EmulatorServer(port=0, state_dir=state, ssh=False).start()
    try:
        assert again.backend.tpu_grpc_endpoint == before
        client = grpc_client(tpu_v2, str(before))
        assert list(client.list_nodes(parent=PARENT)) == []
        client.transport.close()
    finally:
        again.stop()


def test_the_script_that_checks_other_client_versions_passes(emulator) -> None:
    """scripts/check_google_cloud_tpu.py, run by hand with google-cloud-tpu 1.19.1 (see
    docs/compatibility.md), passes with the version installed here."""
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[2] / "scripts" / "check_google_cloud_tpu.py"
    run = subprocess.run(
        [sys.executable, str(script), emulator.address],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[1:] == [
        "REST: create, get, list, stop, start, delete: ok",
        "REST: a v5e node's enums as numbers (get, list): ok",
        "gRPC: create, get, list, stop, start, delete: ok",
        "gRPC v2alpha1: queued create, ACTIVE, list, delete: ok",
    ]


def test_grpc_calls_pass_the_front_end_of_rest(emulator) -> None:
    """Counted, their bodies logged, and faults injected, as REST calls are."""
    client = grpc_client(tpu_v2, emulator.status()["tpu_grpc_endpoint"])
    try:
        node = create(client, "g1", labels={"a": "b"})
        assert emulator.requests()["POST create"] == 1
        (logged,) = emulator.bodies("create")
        assert logged["path"] == f"/v2/{PARENT}/nodes"
        assert logged["query"] == {"nodeId": "g1"}
        assert logged["body"] == {
            "acceleratorType": "v3-8",
            "runtimeVersion": runtime_for("v3-8"),
            "labels": {"a": "b"},
        }
        emulator.faults(rate=1, codes=[429], paths="/nodes$")
        with pytest.raises(exceptions.ResourceExhausted) as limited:
            list(client.list_nodes(parent=PARENT))
        assert limited.value.reason == "RATE_LIMIT_EXCEEDED"
        emulator.faults(rate=0)
        client.delete_node(name=node.name).result(timeout=10)
    finally:
        client.transport.close()
