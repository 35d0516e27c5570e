"""Drive a running emulator with whatever google-cloud-tpu this Python has, over REST and
over gRPC: create (waiting for the operation), get, list, stop, start, delete, and a
queued resource through the v2alpha1 client. For versions other than the one tpuctl
installs (tests/emulator/test_grpc_tpu.py covers that one), e.g. 1.19.1, which Google's
`tpu/` samples pin:

    python3 -m venv /tmp/tpu119 && /tmp/tpu119/bin/pip install google-cloud-tpu==1.19.1
    tpuctl emulator start --detach --port 8470
    /tmp/tpu119/bin/python scripts/check_google_cloud_tpu.py 127.0.0.1:8470

It only needs google-cloud-tpu (no tpuctl). Exit 0 when every step did what it should.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
import urllib.request
from importlib.metadata import version
from typing import Any

import grpc
from google.api_core import exceptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import tpu_v2, tpu_v2alpha1

PARENT = "projects/tpuctl-demo/locations/us-central1-a"


def control(address: str, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        f"http://{address}/_emulator/v1/{path}", data=data, method=method
    )
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read() or b"null")


def nodes_scenario(client: Any, node_id: str) -> None:
    node = tpu_v2.Node(accelerator_type="v3-8", runtime_version="tpu-ubuntu2204-base")
    made = client.create_node(parent=PARENT, node_id=node_id, node=node).result(timeout=30)
    assert made.state == tpu_v2.Node.State.READY, made.state
    assert client.get_node(name=made.name).id == made.id
    assert made.name in [n.name for n in client.list_nodes(parent=PARENT)]
    stopped = client.stop_node(request={"name": made.name}).result(timeout=30)
    assert stopped.state == tpu_v2.Node.State.STOPPED, stopped.state
    started = client.start_node(request={"name": made.name}).result(timeout=30)
    assert started.state == tpu_v2.Node.State.READY, started.state
    client.delete_node(name=made.name).result(timeout=30)
    try:
        client.get_node(name=made.name)
    except exceptions.NotFound:
        return
    raise AssertionError(f"{made.name} still there")


def v5e_scenario(client: Any, address: str) -> None:
    """Google's `tpu/test_tpu.py` node, v5litepod-1 with tpu-vm-tf-2.17.0-pjrt in
    us-south1-a, read over REST: with `$alt=json;enum-encoding=int` the emulator answers
    `acceleratorConfig.type` as 9, which a client without `V5LITE_POD` (1.19.1) keeps as a
    number. The create's operation is not polled through the client: google-api-core's
    operations client asks for no enum encoding, so its answer names the type."""
    parent = "projects/tpuctl-demo/locations/us-south1-a"
    node = tpu_v2.Node(accelerator_type="v5litepod-1", runtime_version="tpu-vm-tf-2.17.0-pjrt")
    client.create_node(parent=parent, node_id="old-v5e", node=node)
    name = f"{parent}/nodes/old-v5e"
    deadline = time.monotonic() + 30
    while client.get_node(name=name).state != tpu_v2.Node.State.READY:
        assert time.monotonic() < deadline, "the v5e node never became READY"
        time.sleep(0.1)
    assert int(client.get_node(name=name).accelerator_config.type_) == 9  # V5LITE_POD
    assert name in [n.name for n in client.list_nodes(parent=parent)]
    client.delete_node(name=name)
    while control(address, "GET", "nodes"):
        assert time.monotonic() < deadline, "the v5e node was not deleted"
        time.sleep(0.1)


def queued_scenario(alpha: Any, address: str) -> None:
    node = tpu_v2alpha1.Node(accelerator_type="v5litepod-4", runtime_version="v2-tpuv5-litepod")
    spec = tpu_v2alpha1.QueuedResource.Tpu.NodeSpec(parent=PARENT, node_id="old-q", node=node)
    request = tpu_v2alpha1.QueuedResource(tpu=tpu_v2alpha1.QueuedResource.Tpu(node_spec=[spec]))
    made = alpha.create_queued_resource(
        parent=PARENT, queued_resource_id="old-q", queued_resource=request
    ).result(timeout=30)
    deadline = time.monotonic() + 30
    while alpha.get_queued_resource(name=made.name).state.state.name != "ACTIVE":
        assert time.monotonic() < deadline, "the queued resource never became ACTIVE"
        time.sleep(0.1)
    assert made.name in [q.name for q in alpha.list_queued_resources(parent=PARENT)]
    # v2alpha1 expects a QueuedResource, the service answers Empty
    # (see contributing/emulator-fidelity.md)
    with contextlib.suppress(TypeError):
        alpha.delete_queued_resource(request={"name": made.name, "force": True}).result(30)
    deadline = time.monotonic() + 30
    while control(address, "GET", "queued") or control(address, "GET", "nodes"):
        assert time.monotonic() < deadline, "the queued resource was not deleted"
        time.sleep(0.1)


def main(address: str) -> None:
    endpoint = control(address, "GET", "status")["tpu_grpc_endpoint"]
    rest = tpu_v2.TpuClient(
        transport="rest",
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": f"http://{address}"},
    )
    v2_grpc = tpu_v2.TpuClient(
        transport=tpu_v2.services.tpu.transports.TpuGrpcTransport(
            channel=grpc.insecure_channel(endpoint)
        )
    )
    alpha = tpu_v2alpha1.TpuClient(
        transport=tpu_v2alpha1.services.tpu.transports.TpuGrpcTransport(
            channel=grpc.insecure_channel(endpoint)
        )
    )
    print(f"google-cloud-tpu {version('google-cloud-tpu')} against {address} (gRPC {endpoint})")
    nodes_scenario(rest, "old-rest")
    print("REST: create, get, list, stop, start, delete: ok")
    v5e_scenario(rest, address)
    print("REST: a v5e node's enums as numbers (get, list): ok")
    nodes_scenario(v2_grpc, "old-grpc")
    print("gRPC: create, get, list, stop, start, delete: ok")
    queued_scenario(alpha, address)
    print("gRPC v2alpha1: queued create, ACTIVE, list, delete: ok")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:8470")
