"""State machines on wall-clock deadlines, holding and advancing, and persistence."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tpuctl.emulator.control.client import EmulatorControl
from tpuctl.emulator.core.errors import ApiError
from tpuctl.emulator.core.server import EmulatorServer
from tpuctl.emulator.services import Backend
from tpuctl.emulator.tpu.front import TpuFront

P, Z = "p", "us-central1-a"
BODY = {"acceleratorType": "v3-8", "runtimeVersion": "tpu-vm-base"}


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def test_default_durations_and_lazy_transitions() -> None:
    clock = Clock()
    backend = Backend(clock=clock)
    tpu = TpuFront(backend)
    assert backend.config()["durations"] == {
        "create": 1.0,
        "stop": 0.5,
        "start": 0.5,
        "delete": 0.5,
        "hostkeys": 1.0,
        "queued_accept": 0.5,
        "queued_schedule": 0.5,
        "enable_service": 0.5,
        "preempt_notice": 30.0,
    }
    op = tpu.create_node(P, Z, "n", BODY)
    assert "done" not in op  # false, so left out (proto3 JSON)
    assert tpu.get_node(P, Z, "n")["state"] == "CREATING"
    assert "health" not in tpu.get_node(P, Z, "n")
    clock.now += 0.99
    assert tpu.get_node(P, Z, "n")["state"] == "CREATING"
    clock.now += 0.02
    node = tpu.get_node(P, Z, "n")
    assert (node["state"], node["health"]) == ("READY", "HEALTHY")
    done = tpu.get_operation(P, Z, op["name"].rsplit("/", 1)[1])
    assert done["done"] is True and done["response"]["state"] == "READY"
    assert "endTime" in done["metadata"]

    stop = tpu.stop_node(P, Z, "n")
    assert tpu.get_node(P, Z, "n")["state"] == "STOPPING"
    clock.now += 0.5
    assert tpu.get_node(P, Z, "n")["state"] == "STOPPED"
    assert tpu.get_operation(P, Z, stop["name"].rsplit("/", 1)[1])["done"] is True
    tpu.start_node(P, Z, "n")
    assert tpu.get_node(P, Z, "n")["state"] == "STARTING"
    clock.now += 0.5
    tpu.delete_node(P, Z, "n")
    assert tpu.get_node(P, Z, "n")["state"] == "DELETING"
    clock.now += 0.5
    with pytest.raises(ApiError) as exc:
        tpu.get_node(P, Z, "n")
    assert exc.value.http == 404


def test_null_duration_holds_until_advanced() -> None:
    clock = Clock()
    backend = Backend(clock=clock)
    tpu = TpuFront(backend)
    backend.update_config({"durations": {"create": None}})
    tpu.create_node(P, Z, "a", BODY)
    tpu.create_node(P, Z, "b", BODY)
    clock.now += 10_000
    assert tpu.get_node(P, Z, "a")["state"] == "CREATING"
    assert backend.advance(f"projects/{P}/locations/{Z}/nodes/a")["completed"] == [
        f"projects/{P}/locations/{Z}/nodes/a"
    ]
    assert tpu.get_node(P, Z, "a")["state"] == "READY"
    assert tpu.get_node(P, Z, "b")["state"] == "CREATING"
    assert backend.advance() == {"completed": [f"projects/{P}/locations/{Z}/nodes/b"]}
    assert tpu.get_node(P, Z, "b")["state"] == "READY"
    with pytest.raises(ApiError):
        backend.advance("projects/p/locations/us-central1-a/nodes/none")


def test_delete_while_creating_aborts_the_create_operation() -> None:
    backend = Backend(clock=Clock())
    tpu = TpuFront(backend)
    backend.update_config({"durations": {"create": None, "delete": 0}})
    create = tpu.create_node(P, Z, "n", BODY)
    delete = tpu.delete_node(P, Z, "n")
    assert delete["done"] is True
    op = tpu.get_operation(P, Z, create["name"].rsplit("/", 1)[1])
    assert op["done"] is True
    assert op["error"]["code"] == 10
    assert backend.all_nodes() == []


def test_transitions_run_on_the_wall_clock(emulator) -> None:
    """A create takes its duration on the emulator's clock, whoever asks and when: READY
    no sooner than the duration after the call (a lower bound: no load can break it)."""
    emulator.durations(create=2.0)
    client = emulator.tpu_client()
    from google.cloud import tpu_v2

    node = tpu_v2.Node(accelerator_type="v3-8", runtime_version="tpu-vm-base")
    start = time.monotonic()
    op = client.create_node(parent=f"projects/{P}/locations/{Z}", node_id="w", node=node)
    try:
        assert op.result(timeout=30).state == tpu_v2.Node.State.READY
        assert time.monotonic() - start >= 2.0
        assert emulator.nodes()[0]["state"] == "READY"
    finally:
        client.delete_node(name=f"projects/{P}/locations/{Z}/nodes/w").result(timeout=30)


def test_a_held_transition_stays_put_until_advanced(emulator) -> None:
    """CREATING until the transition completes, however often and late it is asked (a
    held create completes only when advanced)."""
    emulator.durations(create=None)
    client = emulator.tpu_client()
    from google.cloud import tpu_v2

    node = tpu_v2.Node(accelerator_type="v3-8", runtime_version="tpu-vm-base")
    name = f"projects/{P}/locations/{Z}/nodes/held"
    client.create_node(parent=f"projects/{P}/locations/{Z}", node_id="held", node=node)
    try:
        for _ in range(3):
            assert emulator.nodes()[0]["state"] == "CREATING"
        assert emulator.advance(name) == [name]
        assert emulator.nodes()[0]["state"] == "READY"
    finally:
        emulator.durations(delete=0)
        client.delete_node(name=name).result(timeout=30)


def test_state_survives_a_restart(tmp_path: Path) -> None:
    server = EmulatorServer(port=0, state_dir=tmp_path).start()
    control = EmulatorControl(server.address)
    control.durations(create=0, delete=0)
    control.config(defaults={"project": "demo-2"})
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import tpu_v2

    def client(address: str) -> tpu_v2.TpuClient:
        return tpu_v2.TpuClient(
            transport="rest",
            client_options={"api_endpoint": f"http://{address}"},
            credentials=AnonymousCredentials(),
        )

    parent = "projects/p/locations/us-central2-b"
    node = tpu_v2.Node(accelerator_type="v4-16", runtime_version="tpu-ubuntu2204-base")
    op = client(server.address).create_node(parent=parent, node_id="kept", node=node)
    first = op.result(timeout=5)
    server.stop()
    state = json.loads((tmp_path / "state.json").read_text())
    assert [n["node_id"] for n in state["nodes"]] == ["kept"]
    assert not list(tmp_path.glob("*.tmp"))

    again = EmulatorServer(port=0, state_dir=tmp_path).start()
    try:
        c2 = client(again.address)
        kept = c2.get_node(name=f"{parent}/nodes/kept")
        assert kept.id == first.id
        assert [e.ip_address for e in kept.network_endpoints] == [
            e.ip_address for e in first.network_endpoints
        ]
        config = EmulatorControl(again.address).config()
        kept_keys = ("create", "stop", "start", "delete")
        durations = {k: v for k, v in config["durations"].items() if k in kept_keys}
        assert durations == {"create": 0.0, "stop": 0.5, "start": 0.5, "delete": 0.0}
        assert config["defaults"] == {"project": "demo-2", "zone": "us-central1-a"}
        from google.longrunning import operations_pb2

        got = c2.get_operation(operations_pb2.GetOperationRequest(name=op.operation.name))
        assert got.done
        # the allocator carried on: a new node gets addresses never handed out before
        more = c2.create_node(parent=parent, node_id="more", node=node).result(timeout=5)
        old = {e.ip_address for e in kept.network_endpoints}
        assert not old & {e.ip_address for e in more.network_endpoints}
        for name in ("kept", "more"):
            c2.delete_node(name=f"{parent}/nodes/{name}").result(timeout=5)
    finally:
        again.stop()


def test_deadlines_survive_a_restart(tmp_path: Path) -> None:
    clock = Clock()
    first = Backend(tmp_path, clock=clock)
    first.update_config({"durations": {"create": 10}})
    TpuFront(first).create_node(P, Z, "n", BODY)
    clock.now += 5
    assert TpuFront(Backend(tmp_path, clock=clock)).get_node(P, Z, "n")["state"] == "CREATING"
    clock.now += 6
    assert TpuFront(Backend(tmp_path, clock=clock)).get_node(P, Z, "n")["state"] == "READY"


def test_reset_clears_state_but_never_reuses_addresses() -> None:
    backend = Backend(clock=Clock())
    tpu = TpuFront(backend)
    backend.update_config({"durations": {"create": 0}})
    a = tpu.create_node(P, Z, "n", BODY)["response"]["networkEndpoints"][0]["ipAddress"]
    backend.set_faults({"rate": 0.5})
    backend.reset()
    assert backend.all_nodes() == [] and backend.operations == {}
    assert backend.config()["durations"]["create"] == 1.0
    assert backend.faults_config()["rate"] == 0.0
    backend.update_config({"durations": {"create": 0}})
    b = tpu.create_node(P, Z, "n", BODY)["response"]["networkEndpoints"][0]["ipAddress"]
    assert a != b
