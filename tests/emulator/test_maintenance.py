"""Host maintenance on both APIs: announced (`upcomingMaintenance` PENDING with its
window, `instance/upcoming-maintenance` on the guest), carried out at the window's start
(`instance/maintenance-event` TERMINATE_ON_HOST_MAINTENANCE, the VM or node down), and
over at its end (back, unless spot); Compute's simulateMaintenanceEvent and
performMaintenance and the TPU API's v2alpha1 performMaintenance, through Google's own
clients. Phases are moved on with the control plane's `advance`, never by sleeping."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from tests.emulator.ssh_helpers import create, delete
from tests.emulator.test_preemption import _get
from tpuctl.emulator.control.client import ControlError
from tpuctl.timestamps import parse_rfc3339

ZONE = "us-east1-d"
PROJECT = "p"
VM = f"projects/{PROJECT}/zones/{ZONE}/instances/"


def _guest(emulator: Any, project: str, zone: str, name: str, worker: int = 0) -> str:
    return (
        f"http://{emulator.address}/_emulator/v1/metadata/{project}/{zone}/{name}/"
        f"{worker}/computeMetadata/v1/instance"
    )


class _Tpu:
    """The TPU API's REST JSON (google-cloud-tpu's v2 Node has no `upcoming_maintenance`,
    and its v2alpha1 client has no REST transport)."""

    def __init__(self, emulator: Any) -> None:
        from google.auth.credentials import AnonymousCredentials
        from google.auth.transport.requests import AuthorizedSession

        self.session = AuthorizedSession(AnonymousCredentials())
        self.base = f"http://{emulator.address}"

    def get_node(self, name: str, version: str = "v2") -> dict[str, Any]:
        got = self.session.get(f"{self.base}/{version}/{name}", timeout=30)
        assert got.status_code == 200, got.text
        return dict(got.json())

    def post(self, name: str, verb: str, version: str = "v2alpha1") -> tuple[int, Any]:
        got = self.session.post(f"{self.base}/{version}/{name}:{verb}", json={}, timeout=30)
        return got.status_code, got.json()


@pytest.fixture
def compute(emulator) -> Any:
    from google.api_core.client_options import ClientOptions
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import compute_v1

    options = ClientOptions(api_endpoint=f"http://{emulator.address}")
    return compute_v1.InstancesClient(
        transport="rest", credentials=AnonymousCredentials(), client_options=options
    )


def _vm(compute: Any, name: str, **scheduling: Any) -> None:
    from google.cloud import compute_v1 as v1

    image = "projects/ubuntu-os-accelerator-images/global/images/family/"
    body = v1.Instance(
        name=name,
        machine_type=f"zones/{ZONE}/machineTypes/ct6e-standard-4t",
        scheduling=v1.Scheduling(on_host_maintenance="TERMINATE", **scheduling),
        disks=[
            v1.AttachedDisk(
                boot=True,
                auto_delete=True,
                initialize_params=v1.AttachedDiskInitializeParams(
                    source_image=image + "ubuntu-accel-2204-amd64-tpu-v5e-v5p-v6e"
                ),
            )
        ],  # fmt: skip
        network_interfaces=[v1.NetworkInterface(network="global/networks/default")],
    )
    compute.insert_unary(project=PROJECT, zone=ZONE, instance_resource=body)


def _status(compute: Any, name: str) -> Any:
    return compute.get(project=PROJECT, zone=ZONE, instance=name)


def test_a_tpu_node_is_told_goes_down_for_the_window_and_comes_back(emulator) -> None:
    node = create(emulator, "kept", "v3-8")
    client = _Tpu(emulator)
    base = _guest(emulator, "tpuctl-demo", "us-central1-a", "kept")
    assert _get(f"{base}/upcoming-maintenance?alt=json")[2] == "{}"
    shown = emulator.maintenance(node.name, notice=3600, duration=600)
    window = shown["upcomingMaintenance"]
    assert window["maintenanceStatus"] == "PENDING" and window["type"] == "SCHEDULED"
    start = parse_rfc3339(window["windowStartTime"]).timestamp()
    end = parse_rfc3339(window["windowEndTime"]).timestamp()
    assert end - start == 600
    got = client.get_node(node.name)  # v2 REST has the field (tpu.v2.json)
    assert got["upcomingMaintenance"] == window and got["state"] == "READY"
    assert window["canReschedule"] is True
    guest = json.loads(_get(f"{base}/upcoming-maintenance?alt=json")[2])
    assert guest["maintenance_status"] == "PENDING" and guest["can_reschedule"] == "true"
    assert guest["window_start_time"] == window["windowStartTime"]
    status, etag, event = _get(f"{base}/maintenance-event")
    assert (status, event) == (200, "NONE")
    # a guest watching the event key is woken when the window starts
    answered: list[tuple[int, str, str]] = []
    url = f"{base}/maintenance-event?wait_for_change=true&last_etag={etag}&timeout_sec=60"
    waiting = threading.Thread(target=lambda: answered.append(_get(url)))
    waiting.start()
    emulator.advance(node.name)  # the window starts: the guest is shut down
    waiting.join(timeout=30)
    assert answered and answered[0][2] == "TERMINATE_ON_HOST_MAINTENANCE"
    assert client.get_node(node.name)["upcomingMaintenance"]["maintenanceStatus"] == "ONGOING"
    emulator.advance(node.name)  # the guest is down
    got = client.get_node(node.name, "v2alpha1")
    assert (got["state"], got["health"]) == ("REPAIRING", "UNHEALTHY_MAINTENANCE")
    emulator.advance(node.name)  # the window is over
    got = client.get_node(node.name)
    assert got["state"] == "READY" and "upcomingMaintenance" not in got
    assert _get(f"{base}/maintenance-event")[2] == "NONE"
    delete(emulator, node.name)


def test_a_spot_tpu_node_does_not_come_back(emulator) -> None:
    node = create(emulator, "spot", "v3-8", scheduling_config={"spot": True})
    emulator.maintenance(node.name, notice=0, duration=0)
    got = emulator.tpu_client().get_node(name=node.name)
    assert got.state.name == "PREEMPTED"
    delete(emulator, node.name)


def test_tpu_perform_maintenance_is_v2alpha1s_and_needs_a_pending_one(emulator) -> None:
    node = create(emulator, "perf", "v3-8")
    client = _Tpu(emulator)
    status, answer = client.post(node.name, "performMaintenance")
    assert status == 400 and "no pending maintenance" in answer["error"]["message"]
    emulator.maintenance(node.name, notice=3600, duration=3600)
    status, op = client.post(node.name, "performMaintenance")
    assert status == 200 and op["done"], op
    assert "google.cloud.tpu.v2alpha1" in op["response"]["@type"]
    got = client.get_node(node.name, "v2alpha1")
    assert got["upcomingMaintenance"]["maintenanceStatus"] == "ONGOING"
    assert client.post(node.name, "performMaintenance", "v2")[0] == 404  # not v2's
    emulator.advance(node.name)
    emulator.advance(node.name)
    status, op = client.post(node.name, "simulateMaintenanceEvent")
    assert status == 200 and op["done"], op
    got = client.get_node(node.name)["upcomingMaintenance"]
    assert (got["type"], got["maintenanceStatus"]) == ("UNSCHEDULED", "ONGOING")
    emulator.advance(node.name)
    emulator.advance(node.name)
    delete(emulator, node.name)


def test_a_compute_vm_stops_for_the_window_and_restarts(emulator, compute) -> None:
    _vm(compute, "m1", automatic_restart=True)
    shown = emulator.maintenance(VM + "m1", notice=3600, duration=600)
    assert shown["instances"] == [VM + "m1"]
    got = _status(compute, "m1")
    upcoming = got.resource_status.upcoming_maintenance
    assert upcoming.maintenance_status == "PENDING" and upcoming.type_ == "SCHEDULED"
    assert upcoming.window_start_time == shown["upcomingMaintenance"]["windowStartTime"]
    base = _guest(emulator, PROJECT, ZONE, "m1")
    assert json.loads(_get(f"{base}/upcoming-maintenance?alt=json")[2])["type"] == "SCHEDULED"
    assert _get(f"{base}/upcoming-maintenance/maintenance_status")[2] == "PENDING"
    emulator.advance(VM + "m1")
    assert _get(f"{base}/maintenance-event")[2] == "TERMINATE_ON_HOST_MAINTENANCE"
    emulator.advance(VM + "m1")
    got = _status(compute, "m1")
    assert got.status == "TERMINATED"
    assert got.resource_status.upcoming_maintenance.maintenance_status == "ONGOING"
    emulator.advance(VM + "m1")
    got = _status(compute, "m1")
    assert got.status == "RUNNING" and not got.resource_status.upcoming_maintenance.type_
    compute.delete_unary(project=PROJECT, zone=ZONE, instance="m1")


def test_a_spot_compute_vm_stays_stopped(emulator, compute) -> None:
    _vm(compute, "s1", provisioning_model="SPOT", automatic_restart=False)
    emulator.maintenance(VM + "s1", notice=0, duration=0)
    assert _status(compute, "s1").status == "TERMINATED"
    compute.delete_unary(project=PROJECT, zone=ZONE, instance="s1")


def test_simulate_and_perform_maintenance_on_compute(emulator, compute) -> None:
    from google.api_core import exceptions

    _vm(compute, "m2", automatic_restart=True)
    with pytest.raises(exceptions.BadRequest, match="no pending maintenance"):
        compute.perform_maintenance_unary(project=PROJECT, zone=ZONE, instance="m2")
    emulator.maintenance(VM + "m2", notice=3600, duration=3600)
    op = compute.perform_maintenance_unary(project=PROJECT, zone=ZONE, instance="m2")
    assert op.status.name == "DONE" and op.operation_type == "performMaintenance"
    got = _status(compute, "m2").resource_status.upcoming_maintenance
    assert got.maintenance_status == "ONGOING"
    emulator.advance(VM + "m2")
    emulator.advance(VM + "m2")
    assert _status(compute, "m2").status == "RUNNING"
    op = compute.simulate_maintenance_event_unary(project=PROJECT, zone=ZONE, instance="m2")
    assert op.status.name == "DONE"
    got = _status(compute, "m2").resource_status.upcoming_maintenance
    assert (got.type_, got.maintenance_status) == ("UNSCHEDULED", "ONGOING")
    emulator.advance(VM + "m2")  # down
    assert _status(compute, "m2").status == "TERMINATED"
    with pytest.raises(exceptions.BadRequest):
        compute.simulate_maintenance_event_unary(project=PROJECT, zone=ZONE, instance="m2")
    emulator.advance(VM + "m2")
    compute.delete_unary(project=PROJECT, zone=ZONE, instance="m2")


def test_the_controls_refuse_what_they_cannot_do(emulator) -> None:
    missing = "projects/tpuctl-demo/locations/us-central1-a/nodes/nope"
    with pytest.raises(ControlError, match=missing):
        emulator.maintenance(missing, notice=10)
    with pytest.raises(ControlError, match=VM + "nope"):
        emulator.maintenance(VM + "nope", notice=10)
    with pytest.raises(ControlError, match="node is projects"):
        emulator.maintenance("nope", notice=10)
    with pytest.raises(ControlError, match="notice must be seconds"):
        emulator.maintenance(missing, notice=-1)
