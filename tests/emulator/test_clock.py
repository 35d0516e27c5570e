"""Transitions run on the emulator's clock, whether or not anyone polls; queued requests
answer their validity as the time it ends; host keys show a little after READY."""

from __future__ import annotations

import threading

from tests.emulator.test_transitions import Clock
from tpuctl.emulator.core.server import EmulatorServer
from tpuctl.emulator.services import Backend
from tpuctl.emulator.tpu.front import TpuFront
from tpuctl.timestamps import parse_rfc3339

Z = "us-central1-a"
NODE = {"acceleratorType": "v3-8", "runtimeVersion": "tpu-ubuntu2204-base"}


def queued_body(**policy: str) -> dict:
    spec = {"parent": f"projects/p/locations/{Z}", "nodeId": "q-node", "node": NODE}
    return {"tpu": {"nodeSpec": [spec]}, "queueingPolicy": policy}


def test_a_request_nobody_polled_has_gone_as_far_as_the_clock_says() -> None:
    clock = Clock()
    backend = Backend(clock=clock)
    tpu = TpuFront(backend)
    backend.update_config(
        {"durations": {"queued_accept": 0.5, "queued_schedule": 0.5, "create": 0.5}}
    )
    tpu.create_queued_resource("p", Z, "q", queued_body())
    clock.now += 3.0
    # One look, 3 s later: every step was due long ago (before: ACCEPTED, one step a look).
    got = tpu.get_queued_resource("p", Z, "q")
    assert got["state"]["state"] == "ACTIVE"
    node = tpu.get_node("p", Z, "q-node")
    assert node["state"] == "READY"
    # the node began when the request was provisioned (1 s in), so it was READY at 1.5 s
    created = parse_rfc3339(node["createTime"]).timestamp()
    assert created == 1_800_000_001.0


def test_validity_that_ran_out_before_a_late_look_fails_the_request() -> None:
    clock = Clock()
    backend = Backend(clock=clock)
    tpu = TpuFront(backend)
    backend.update_config(
        {"durations": {"queued_accept": 0.5, "queued_schedule": 0.5}, "capacity": {Z: {"v3": 0}}}
    )
    tpu.create_queued_resource("p", Z, "q", queued_body(validUntilDuration="2s"))
    clock.now += 10.0
    got = tpu.get_queued_resource("p", Z, "q")
    assert got["state"]["state"] == "FAILED"
    assert "validity ran out" in got["state"]["failedData"]["error"]["message"]


def test_valid_until_duration_is_answered_as_the_time_it_ends() -> None:
    clock = Clock()
    backend = Backend(clock=clock)
    tpu = TpuFront(backend)
    op = tpu.create_queued_resource(
        "p", Z, "q", queued_body(validUntilDuration="3600s", validAfterDuration="60s")
    )
    for answer in (op["response"], tpu.get_queued_resource("p", Z, "q")):
        assert answer["queueingPolicy"] == {
            "validUntilTime": "2027-01-15T09:00:00Z",  # 1_800_000_000 + 3600 s
            "validAfterTime": "2027-01-15T08:01:00Z",
        }


def test_transitions_happen_on_time_with_no_call_at_all() -> None:
    """The server's ticker applies due transitions between requests, so what follows a
    node's state (its SSH servers, its startup script) follows the clock too."""
    server = EmulatorServer(port=0, state_dir=None, storage=False, ssh=False).start()
    try:
        backend = server.backend
        tpu = TpuFront(backend)
        backend.update_config({"durations": {"create": 0.2}})
        tpu.create_node("p", Z, "n", NODE)
        ready = threading.Event()

        def listener() -> None:  # runs under the lock after every change
            node = backend.nodes.get(f"projects/p/locations/{Z}/nodes/n")
            if node is not None and node.state == "READY":
                ready.set()

        backend.follow(listener)
        assert ready.wait(10), "the node never turned READY without a call"
        backend.unfollow(listener)
        backend.update_config({"durations": {"delete": 0}})
        tpu.delete_node("p", Z, "n")
    finally:
        server.stop()


FULL = f"projects/p/locations/{Z}/nodes/n"


def _node_publishing(create: float, hostkeys: float) -> tuple[Clock, Backend, TpuFront]:
    """Node `n`, created with these durations, whose worker 0 has an SSH host key and an
    attribute of another namespace to publish."""
    clock = Clock()
    backend = Backend(clock=clock)
    tpu = TpuFront(backend)
    backend.update_config({"durations": {"create": create, "hostkeys": hostkeys}})
    tpu.create_node("p", Z, "n", NODE)
    node = backend.nodes[FULL]
    backend.publish(node, 0, [{"namespace": "hostkeys", "key": "ssh-ed25519", "value": "AAAA"}])
    backend.publish(node, 0, [{"namespace": "other", "key": "k", "value": "v"}])
    return clock, backend, tpu


def _keys(tpu: TpuFront, query_path: str = "") -> list[str]:
    """The keys of worker 0's guest attributes under `query_path`, as the API answers."""
    got = tpu.get_guest_attributes("p", Z, "n", {"queryPath": query_path} if query_path else {})
    return [i["key"] for i in got["guestAttributes"][0]["queryValue"].get("items", [])]


def test_host_keys_show_a_little_after_ready() -> None:
    clock, _, tpu = _node_publishing(create=1.0, hostkeys=2.0)
    assert _keys(tpu) == ["k"]  # CREATING: the guest is not up
    clock.now += 1.5
    assert tpu.get_node("p", Z, "n")["state"] == "READY"
    assert _keys(tpu) == ["k"]  # READY half a second ago: not yet
    clock.now += 1.5
    assert _keys(tpu) == ["ssh-ed25519", "k"]  # 2 s after READY (at 1 s): published


def test_advance_publishes_the_host_keys_of_a_node_still_booting() -> None:
    _, backend, tpu = _node_publishing(create=0.0, hostkeys=3600.0)
    # still booting
    assert tpu.get_node("p", Z, "n")["state"] == "READY" and _keys(tpu, "hostkeys/") == []
    assert backend.advance(FULL) == {"completed": [FULL]}
    assert _keys(tpu, "hostkeys/") == ["ssh-ed25519"]
    assert backend.advance(FULL) == {"completed": []}  # nothing left pending
