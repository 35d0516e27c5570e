"""Flex-start on the TPU API: v2alpha1 over REST, as gcloud alpha calls it; a flex-start
request waits for capacity like any queued resource, and its nodes are deleted when
its run duration ends, the request then SUSPENDED."""

from __future__ import annotations

import pytest

from tests.emulator.test_gcloud import gcloud, point_at
from tests.emulator.test_transitions import Clock
from tpuctl.emulator.core.errors import ApiError
from tpuctl.emulator.services import Backend
from tpuctl.emulator.tpu.front import TpuAlphaFront, TpuFront
from tpuctl.timestamps import parse_rfc3339

Z = "us-east5-a"
NODE = {"acceleratorType": "v6e-8", "runtimeVersion": "v2-alpha-tpuv6e"}
FOUR_HOURS = 4 * 3600


def flex_body(**extra) -> dict:
    spec = {"parent": f"projects/p/locations/{Z}", "nodeId": "fx", "node": dict(NODE)}
    return {"tpu": {"nodeSpec": [spec]}, "provisioningModel": "FLEX_START", **extra}


def test_gcloud_alpha_creates_describes_and_deletes_a_flex_start_request(emulator) -> None:
    point_at(emulator)
    alpha = ("alpha", "compute", "tpus", "queued-resources")
    made = gcloud(
        *alpha, "create", "fx", "--node-id", "fx", "--zone", Z, "--accelerator-type", "v6e-8",
        "--runtime-version", "v2-alpha-tpuv6e", "--provisioning-model=flex-start",
        "--max-run-duration=4h",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    (sent,) = emulator.bodies("queuedResources.create")
    assert sent["path"] == f"/v2alpha1/projects/p/locations/{Z}/queuedResources"
    assert sent["body"]["provisioningModel"] == "FLEX_START"
    assert sent["body"]["runDuration"] == {"maxRunDuration": "14400s"}
    described = gcloud(*alpha, "describe", "fx", "--zone", Z, "--format=value(provisioningModel)")
    assert described.returncode == 0, described.stderr
    assert described.stdout.strip() == "FLEX_START"
    (v2,) = emulator.queued()  # v2 has no such fields: its answer leaves them out
    assert "provisioningModel" not in v2 and "runDuration" not in v2
    emulator.durations(delete=0)
    gone = gcloud(*alpha, "delete", "fx", "--zone", Z, "--force", "--quiet")
    assert gone.returncode == 0, gone.stderr
    assert emulator.queued() == [] and emulator.nodes() == []


def test_a_flex_start_request_waits_then_runs_for_its_duration() -> None:
    clock = Clock()
    backend = Backend(clock=clock)
    alpha, v2 = TpuAlphaFront(backend), TpuFront(backend)
    backend.update_config(
        {
            "durations": {"queued_accept": 0, "queued_schedule": 0, "create": 0, "delete": 1},
            "capacity": {Z: {"v6e": 0}},
        }
    )
    alpha.create_queued_resource("p", Z, "fx", flex_body(runDuration={"maxRunDuration": "14400s"}))
    clock.now += 60
    assert alpha.get_queued_resource("p", Z, "fx")["state"]["state"] == "WAITING_FOR_RESOURCES"
    backend.update_config({"capacity": {Z: {"v6e": 8}}})
    clock.now += 1
    got = alpha.get_queued_resource("p", Z, "fx")
    assert got["state"]["state"] == "ACTIVE"
    assert got["provisioningModel"] == "FLEX_START"
    provisioned = clock.now
    node = alpha.get_node("p", Z, "fx")
    ends = parse_rfc3339(node["schedulingConfig"]["terminationTimestamp"]).timestamp()
    assert ends == pytest.approx(provisioned + FOUR_HOURS, abs=1)
    assert "terminationTimestamp" not in v2.get_node("p", Z, "fx").get("schedulingConfig", {})
    clock.now = provisioned + FOUR_HOURS - 5
    assert v2.get_node("p", Z, "fx")["state"] == "READY"
    clock.now = provisioned + FOUR_HOURS + 0.5
    assert v2.get_node("p", Z, "fx")["state"] == "DELETING"  # the run is over
    clock.now += 2
    with pytest.raises(ApiError, match="was not found"):
        v2.get_node("p", Z, "fx")
    after = alpha.get_queued_resource("p", Z, "fx")["state"]
    assert after == {"state": "SUSPENDED", "stateInitiator": "SERVICE"}


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({}, "needs runDuration.maxRunDuration"),
        ({"runDuration": {"maxRunDuration": "604801s"}}, "at most 7 days"),
        ({"runDuration": {"maxRunDuration": "4h"}}, "a duration like '3600s'"),
        ({"provisioningModel": "CHEAP", "runDuration": {"maxRunDuration": "60s"}},
         "Invalid value for field 'provisioningModel'"),
    ],
    ids=["no-duration", "over-7-days", "bad-duration", "bad-model"],
)  # fmt: skip
def test_flex_start_requests_the_api_refuses(extra, words) -> None:
    alpha = TpuAlphaFront(Backend(clock=Clock()))
    with pytest.raises(ApiError, match=words) as refused:
        alpha.create_queued_resource("p", Z, "fx", flex_body(**extra))
    assert refused.value.status == "INVALID_ARGUMENT"


def test_v2_refuses_the_fields_only_v2alpha1_has() -> None:
    v2 = TpuFront(Backend(clock=Clock()))
    with pytest.raises(ApiError, match='Unknown name "provisioningModel"'):
        v2.create_queued_resource("p", Z, "fx", flex_body(runDuration={"maxRunDuration": "60s"}))
