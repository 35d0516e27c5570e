"""The control plane under /_emulator/v1/."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request

import pytest

from tpuctl.catalog import runtime_for
from tpuctl.emulator.control.client import ControlError


def test_status_and_defaults(emulator) -> None:
    status = emulator.status()
    storage = status.pop("storage_endpoint")
    assert storage.startswith("http://127.0.0.1:")
    assert status.pop("monitoring_endpoint").startswith("127.0.0.1:")  # gRPC: host:port
    assert status.pop("tpu_grpc_endpoint").startswith("127.0.0.1:")  # the TPU API, gRPC
    assert status.pop("registry_endpoint").startswith("127.0.0.1:")  # Docker API (registry/)
    # the Cloud Billing Catalog API, on the emulator's own port
    assert status.pop("billing_endpoint") == f"http://{emulator.address}"
    assert status == {
        "ok": True,
        "nodes": 0,
        "defaults": {"project": "tpuctl-demo", "zone": "us-central1-a"},
        "ssh_port": status["ssh_port"],  # a free port picked at start (tests/emulator/test_ssh*)
        "caller": "you@example.com",  # who the emulated caller is (emulator/iam/access.py)
        "workers_sandbox": "bwrap",  # worker commands run in a root of their own (sandbox.py)
    }


def test_config_partial_update_and_validation(emulator) -> None:
    config = emulator.config(durations={"stop": 2.5})
    durations = {
        k: v for k, v in config["durations"].items() if k in ("create", "stop", "start", "delete")
    }
    assert durations == {"create": 0, "stop": 2.5, "start": 0, "delete": 0}
    assert emulator.config()["durations"]["stop"] == 2.5
    emulator.config(defaults={"zone": "us-central2-b"})
    assert emulator.status()["defaults"] == {"project": "tpuctl-demo", "zone": "us-central2-b"}
    for bad in ({"durations": {"reboot": 1}}, {"durations": {"stop": -1}}, {"other": 1}):
        with pytest.raises(ControlError):
            emulator.config(**bad)
    emulator.reset()
    assert emulator.config()["durations"]["stop"] == 0.5


def test_nodes_lists_every_project_and_zone(emulator) -> None:
    client = emulator.tpu_client()
    from google.cloud import tpu_v2

    made = []
    for parent, acc in (
        ("projects/a/locations/us-central1-a", "v3-8"),
        ("projects/b/locations/us-central2-b", "v4-8"),
    ):
        node = tpu_v2.Node(accelerator_type=acc, runtime_version=runtime_for(acc))
        made.append(client.create_node(parent=parent, node_id="n", node=node).result(timeout=5))
    assert [n["name"] for n in emulator.nodes()] == [m.name for m in made]
    assert emulator.status()["nodes"] == 2
    for m in made:
        client.delete_node(name=m.name).result(timeout=5)


def test_preempt_a_spot_node(emulator) -> None:
    client = emulator.tpu_client()
    from google.cloud import tpu_v2

    node = tpu_v2.Node(
        accelerator_type="v3-8",
        runtime_version="tpu-vm-base",
        scheduling_config=tpu_v2.SchedulingConfig(spot=True),
    )
    made = client.create_node(
        parent="projects/p/locations/us-central1-a", node_id="s", node=node
    ).result(timeout=5)
    assert made.scheduling_config.spot
    assert emulator.preempt(made.name)["state"] == "PREEMPTED"
    assert client.get_node(name=made.name).state == tpu_v2.Node.State.PREEMPTED
    client.delete_node(name=made.name).result(timeout=5)


def test_unknown_control_path(emulator) -> None:
    with pytest.raises(ControlError, match="not found"):
        emulator.call("GET", "nope")


def test_keep_alive_round_trip_is_fast(emulator) -> None:
    host, port = emulator.address.split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = sock.makefile("rb")
        request = (
            f"GET /_emulator/v1/status HTTP/1.1\r\nHost: {emulator.address}\r\n\r\n"
        ).encode()
        start = time.monotonic()
        for _ in range(50):
            sock.sendall(request)
            assert reader.readline().startswith(b"HTTP/1.1 200")
            length = 0
            while (line := reader.readline()) != b"\r\n":
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            assert json.loads(reader.read(length))["ok"] is True
        per_call = (time.monotonic() - start) / 50
    assert per_call < 0.02, f"{per_call * 1000:.1f} ms per call on one connection"


def test_api_errors_on_bad_json(emulator) -> None:
    request = urllib.request.Request(
        f"http://{emulator.address}/v2/projects/p/locations/us-central1-a/nodes?nodeId=x",
        data=b"{not json",
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(request, timeout=5)
    assert exc.value.code == 400
    assert json.load(exc.value)["error"]["message"].startswith("Invalid JSON payload received.")
