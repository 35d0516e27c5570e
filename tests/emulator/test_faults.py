"""Injected faults, the delay, and request counts."""

from __future__ import annotations

import time

import pytest
from google.api_core import exceptions as gx
from google.cloud import tpu_v2

from tpuctl.emulator.control.client import ControlError

PARENT = "projects/p/locations/us-central1-a"
NODE = tpu_v2.Node(accelerator_type="v3-8", runtime_version="tpu-vm-base")


def test_rate_one_fails_every_call_with_the_chosen_codes(emulator) -> None:
    client = emulator.tpu_client()
    emulator.faults(rate=1.0, codes=[429], seed=1)
    with pytest.raises(gx.TooManyRequests) as exc:
        client.get_node(name=f"{PARENT}/nodes/x")
    error = exc.value.response.json()["error"]
    assert error["status"] == "RESOURCE_EXHAUSTED"
    assert "per minute" in error["message"]
    assert exc.value.reason == "RATE_LIMIT_EXCEEDED"
    assert exc.value.domain == "googleapis.com"

    emulator.faults(rate=1.0, codes=[500, 503], seed=7)
    seen = set()
    for _ in range(20):
        with pytest.raises((gx.InternalServerError, gx.ServiceUnavailable)) as exc2:
            list(client.list_nodes(parent=PARENT))
        seen.add(exc2.value.code)
    assert seen == {500, 503}
    assert emulator.nodes() == []  # nothing happened: the faults came before the calls


def test_after_rate_one_means_the_mutation_happened(emulator) -> None:
    client = emulator.tpu_client()
    emulator.faults(rate=1.0, codes=[503], after_rate=1.0, seed=3)
    with pytest.raises(gx.ServiceUnavailable):
        client.create_node(parent=PARENT, node_id="adopt-me", node=NODE)
    emulator.faults()  # off again
    (node,) = emulator.nodes()
    assert node["name"] == f"{PARENT}/nodes/adopt-me"
    with pytest.raises(gx.Conflict):  # a naive retry would now collide
        client.create_node(parent=PARENT, node_id="adopt-me", node=NODE)
    client.delete_node(name=node["name"]).result(timeout=5)


def test_requests_are_counted_by_method_and_verb(emulator) -> None:
    client = emulator.tpu_client()
    emulator.faults(rate=1.0, codes=[500], seed=1)
    for _ in range(3):
        with pytest.raises(gx.InternalServerError):
            client.create_node(parent=PARENT, node_id="n", node=NODE)
    emulator.faults()
    client.create_node(parent=PARENT, node_id="n", node=NODE).result(timeout=5)
    client.get_node(name=f"{PARENT}/nodes/n")
    client.delete_node(name=f"{PARENT}/nodes/n").result(timeout=5)
    counts = emulator.requests()
    assert counts["POST create"] == 4
    assert counts["GET get"] == 1
    assert counts["DELETE delete"] == 1
    emulator.reset()
    assert emulator.requests() == {}


def test_delay_is_added_to_api_calls_only(emulator) -> None:
    client = emulator.tpu_client()
    emulator.faults(delay=0.2)
    start = time.monotonic()
    list(client.list_nodes(parent=PARENT))
    assert time.monotonic() - start >= 0.2
    start = time.monotonic()
    emulator.status()
    assert time.monotonic() - start < 0.2
    emulator.faults()


def test_partial_rate_is_seeded_and_repeatable(emulator) -> None:
    client = emulator.tpu_client()

    def pattern() -> list[bool]:
        emulator.faults(rate=0.5, codes=[503], seed=42)
        out = []
        for _ in range(20):
            try:
                list(client.list_nodes(parent=PARENT))
                out.append(True)
            except gx.ServiceUnavailable:
                out.append(False)
        return out

    first = pattern()
    assert first == pattern()
    assert 0 < first.count(False) < 20


@pytest.mark.parametrize(
    "bad",
    [{"rate": 2}, {"codes": [404]}, {"codes": []}, {"codes": 5}, {"delay": -1}, {"bogus": 1}],
)
def test_bad_fault_configs_are_refused(emulator, bad: dict) -> None:
    with pytest.raises(ControlError):
        emulator.faults(**bad)


def test_paths_limit_faults_to_matching_calls(emulator) -> None:
    client = emulator.tpu_client()
    emulator.faults(rate=1.0, codes=[503], paths=r"nodes\?nodeId=")
    assert list(client.list_nodes(parent=PARENT)) == []  # not matched: never fails
    with pytest.raises(gx.ServiceUnavailable):
        client.create_node(parent=PARENT, node_id="n", node=NODE)
    emulator.faults()
    assert emulator.nodes() == []


def test_quota_faults_look_like_quota_errors(emulator) -> None:
    client = emulator.tpu_client()
    emulator.faults(rate=1.0, codes=[429], quota=True)
    with pytest.raises(gx.TooManyRequests) as exc:
        list(client.list_nodes(parent="projects/p/locations/us-east5-a"))
    error = exc.value.response.json()["error"]
    assert error["status"] == "RESOURCE_EXHAUSTED"
    assert error["message"].startswith("Quota limit '")
    assert error["message"].endswith("has been exceeded. Limit: 0 in region us-east5.")
    assert error["details"][0]["@type"] == "type.googleapis.com/google.rpc.QuotaFailure"
    assert exc.value.reason is None  # no RATE_LIMIT_EXCEEDED: retrying will not help
    emulator.faults()
