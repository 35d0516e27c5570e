"""Compute Engine's TPU VM instances: insert, get, list, labels, stop/start, delete, and
their zone operations, through a plain REST client."""

from __future__ import annotations

import re

import pytest
from google.api_core.exceptions import GoogleAPICallError

from tests.emulator.compute_helpers import ZONE, Compute, body
from tpuctl.emulator.compute.models import Instance

Z = f"zones/{ZONE}"


@pytest.fixture
def compute(emulator) -> Compute:
    return Compute(emulator.address)


def test_insert_get_list_delete(compute: Compute, emulator) -> None:
    op = compute.ok("POST", f"{Z}/instances", body())
    assert op["kind"] == "compute#operation" and op["operationType"] == "insert"
    assert op["targetLink"].endswith(f"/compute/v1/projects/p/{Z}/instances/vm1")
    done = compute.wait(op)
    assert done["status"] == "DONE" and "error" not in done
    # Compute's timestamps: an offset and three digits of fraction
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}-0[78]:00", done["insertTime"])

    vm = compute.ok("GET", f"{Z}/instances/vm1")
    assert vm["status"] == "RUNNING"
    assert vm["machineType"].endswith(f"{Z}/machineTypes/ct6e-standard-4t")
    nic = vm["networkInterfaces"][0]
    assert (
        nic["networkIP"].startswith("127.") and nic["accessConfigs"][0]["natIP"] == nic["networkIP"]
    )
    assert vm["scheduling"]["onHostMaintenance"] == "TERMINATE"
    assert vm["labels"] == {"tpuctl": "managed"} and vm["id"].isdigit()
    assert [i["name"] for i in emulator.instances()] == [f"projects/p/{Z}/instances/vm1"]

    listed = compute.ok("GET", f"{Z}/instances")
    assert [i["name"] for i in listed["items"]] == ["vm1"]
    assert compute.ok("GET", f"{Z}/instances", filter="labels.tpuctl=managed")["items"]
    assert compute.ok("GET", f"{Z}/instances", filter='(labels.tpuctl = "other")')["items"] == []
    aggregated = compute.ok("GET", "aggregated/instances")
    assert [i["name"] for i in aggregated["items"][Z]["instances"]] == ["vm1"]

    gone = compute.wait(compute.ok("DELETE", f"{Z}/instances/vm1"))
    assert gone["operationType"] == "delete" and gone["status"] == "DONE"
    status, missing = compute.call("GET", f"{Z}/instances/vm1")
    assert status == 404
    assert missing["error"]["errors"][0]["reason"] == "notFound"
    assert (
        missing["error"]["message"] == f"The resource 'projects/p/{Z}/instances/vm1' was not found"
    )


def test_status_moves_through_provisioning_and_staging(compute: Compute, emulator) -> None:
    emulator.durations(create=None)  # held until the control plane advances it
    op = compute.ok("POST", f"{Z}/instances", body())
    assert op["status"] == "RUNNING"
    assert compute.ok("GET", f"{Z}/instances/vm1")["status"] == "PROVISIONING"
    assert compute.ok("GET", f"{Z}/operations/{op['name']}")["status"] == "RUNNING"
    assert emulator.advance(f"projects/p/{Z}/instances/vm1") == [f"projects/p/{Z}/instances/vm1"]
    assert compute.ok("GET", f"{Z}/instances/vm1")["status"] == "RUNNING"
    assert compute.wait(op)["status"] == "DONE"
    emulator.durations(delete=None)
    compute.ok("DELETE", f"{Z}/instances/vm1")
    assert compute.ok("GET", f"{Z}/instances/vm1")["status"] == "STOPPING"
    emulator.advance()
    assert emulator.instances() == []


def test_a_transition_shows_its_halves() -> None:
    vm = Instance("p", ZONE, "vm1", "ct6e-standard-4t", "v6e", 4, {}, 0.0, "127.0.0.1")
    vm.begin("create", 100.0, 10.0)
    assert [vm.shown_status(t) for t in (100.0, 104.9, 105.0)] == [
        "PROVISIONING",
        "PROVISIONING",
        "STAGING",
    ]
    assert not vm.due(109.9) and vm.due(110.0)
    assert vm.finish() is False and vm.status == "RUNNING"
    vm.begin("delete", 200.0, 1.0)
    assert vm.shown_status(200.0) == "STOPPING" and vm.finish() is True


def test_duplicate_name_bad_name_and_unknown_zone(compute: Compute) -> None:
    compute.wait(compute.ok("POST", f"{Z}/instances", body()))
    status, dup = compute.call("POST", f"{Z}/instances", body())
    assert status == 409 and dup["error"]["errors"][0]["reason"] == "alreadyExists"
    assert dup["error"]["message"] == f"The resource 'projects/p/{Z}/instances/vm1' already exists"
    status, bad = compute.call("POST", f"{Z}/instances", body(name="Bad_Name"))
    assert status == 400 and bad["error"]["errors"][0] == {
        "message": "Invalid value for field 'resource.name': 'Bad_Name'. Must be a match of "
        "regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'",
        "domain": "global",
        "reason": "invalid",
    }
    status, zone = compute.call("GET", "zones/us-east1/instances")
    assert status == 400
    assert zone["error"]["message"] == "Invalid value for field 'zone': 'us-east1'. Unknown zone."
    compute.wait(compute.ok("DELETE", f"{Z}/instances/vm1"))


def test_machine_type_and_scheduling_are_checked(compute: Compute) -> None:
    status, bad = compute.call("POST", f"{Z}/instances", body(machine="ct6e-standard-2t"))
    assert status == 400
    assert bad["error"]["message"] == (
        f"Invalid value for field 'resource.machineType': '{Z}/machineTypes/ct6e-standard-2t'. "
        f"Machine type with name 'ct6e-standard-2t' does not exist in zone '{ZONE}'."
    )
    # offered, but not in this zone: TPU7x is only in us-central1-c
    status, _ = compute.call("POST", f"{Z}/instances", body(machine="tpu7x-standard-4t"))
    assert status == 400
    status, v5e = compute.call(
        "POST", "zones/us-east5-a/instances", body(machine="ct5lp-hightpu-4t", zone="us-east5-a")
    )
    assert status == 400
    assert (
        v5e["error"]["message"]
        == "This user agent is not allowed to use the machine type [ct5lp-hightpu-4t]"
    )
    migrate = body(scheduling={"onHostMaintenance": "MIGRATE"})
    status, live = compute.call("POST", f"{Z}/instances", migrate)
    assert status == 400
    assert (
        live["error"]["message"]
        == "Instances with guest accelerators do not support live migration."
    )
    assert compute.call("POST", f"{Z}/instances", body(scheduling={}))[0] == 400  # MIGRATE: default
    spot = body(scheduling={"onHostMaintenance": "TERMINATE", "provisioningModel": "SPOT",
                            "automaticRestart": True})  # fmt: skip
    status, restart = compute.call("POST", f"{Z}/instances", spot)
    assert status == 400 and "AutomaticRestart is true" in restart["error"]["message"]
    spot["scheduling"]["automaticRestart"] = False
    compute.wait(compute.ok("POST", f"{Z}/instances", spot))
    vm = compute.ok("GET", f"{Z}/instances/vm1")
    assert vm["scheduling"]["instanceTerminationAction"] == "STOP"  # Spot's default
    compute.wait(compute.ok("DELETE", f"{Z}/instances/vm1"))


def test_set_labels_needs_the_current_fingerprint(compute: Compute) -> None:
    compute.wait(compute.ok("POST", f"{Z}/instances", body()))
    old = compute.ok("GET", f"{Z}/instances/vm1")["labelFingerprint"]
    new = {"labels": {"tpuctl": "managed", "team": "ml"}, "labelFingerprint": old}
    op = compute.wait(compute.ok("POST", f"{Z}/instances/vm1/setLabels", new))
    assert op["operationType"] == "setLabels" and op["status"] == "DONE"
    vm = compute.ok("GET", f"{Z}/instances/vm1")
    assert vm["labels"] == new["labels"] and vm["labelFingerprint"] != old
    status, stale = compute.call("POST", f"{Z}/instances/vm1/setLabels", new)
    assert status == 412
    assert stale["error"]["errors"][0]["reason"] == "conditionNotMet"
    assert (
        stale["error"]["message"]
        == "Labels fingerprint either invalid or resource labels have changed"
    )
    compute.wait(compute.ok("DELETE", f"{Z}/instances/vm1"))


def test_stop_and_start(compute: Compute) -> None:
    compute.wait(compute.ok("POST", f"{Z}/instances", body()))
    stopped = compute.wait(compute.ok("POST", f"{Z}/instances/vm1/stop"))
    assert stopped["operationType"] == "stop"
    assert compute.ok("GET", f"{Z}/instances/vm1")["status"] == "TERMINATED"
    compute.wait(compute.ok("POST", f"{Z}/instances/vm1/start"))
    assert compute.ok("GET", f"{Z}/instances/vm1")["status"] == "RUNNING"
    compute.wait(compute.ok("DELETE", f"{Z}/instances/vm1"))


def test_no_capacity_fails_the_operation(compute: Compute, emulator) -> None:
    emulator.capacity({ZONE: {"v6e": 4}})
    compute.wait(compute.ok("POST", f"{Z}/instances", body()))
    done = compute.wait(compute.ok("POST", f"{Z}/instances", body(name="vm2")))
    assert done["status"] == "DONE"
    (error,) = done["error"]["errors"]
    assert error["code"] == "ZONE_RESOURCE_POOL_EXHAUSTED"
    assert error["message"].startswith(
        f"The zone 'projects/p/zones/{ZONE}' does not have enough resources available"
    )
    assert done["httpErrorStatusCode"] == 503
    assert compute.call("GET", f"{Z}/instances/vm2")[0] == 404  # it never came to be
    compute.wait(compute.ok("DELETE", f"{Z}/instances/vm1"))


def test_host_keys_only_with_guest_attributes(compute: Compute) -> None:
    compute.wait(compute.ok("POST", f"{Z}/instances", body()))
    status, off = compute.call(
        "GET", f"{Z}/instances/vm1/getGuestAttributes", queryPath="hostkeys/"
    )
    assert status == 404
    assert (
        off["error"]["message"]
        == "The resource 'hostkeys/' of type 'Guest Attribute' was not found."
    )
    metadata = {"items": [{"key": "enable-guest-attributes", "value": "TRUE"}]}
    compute.wait(compute.ok("POST", f"{Z}/instances", body(name="vm2", metadata=metadata)))
    keys = compute.ok("GET", f"{Z}/instances/vm2/getGuestAttributes", queryPath="hostkeys/")
    items = keys["queryValue"]["items"]  # the keys the VM's SSH server has, as a guest publishes
    assert {i["namespace"] for i in items} == {"hostkeys"}
    assert "ssh-ed25519" in {i["key"] for i in items}
    for name in ("vm1", "vm2"):
        compute.wait(compute.ok("DELETE", f"{Z}/instances/{name}"))


def test_advance_publishes_the_host_keys_of_a_vm_still_booting(compute: Compute, emulator) -> None:
    emulator.durations(hostkeys=3600)
    metadata = {"items": [{"key": "enable-guest-attributes", "value": "TRUE"}]}
    compute.wait(compute.ok("POST", f"{Z}/instances", body(metadata=metadata)))

    def keys() -> list[dict[str, str]] | int:
        status, got = compute.call(
            "GET", f"{Z}/instances/vm1/getGuestAttributes", queryPath="hostkeys/"
        )
        return list(got["queryValue"]["items"]) if status == 200 else status

    try:
        assert keys() == 404  # RUNNING, its guest still booting: none published
        path = f"projects/p/zones/{ZONE}/instances/vm1"
        assert emulator.advance(path) == [path]
        published = keys()
        assert isinstance(published, list) and "ssh-ed25519" in {i["key"] for i in published}
    finally:
        compute.wait(compute.ok("DELETE", f"{Z}/instances/vm1"))


def test_machine_types_and_images(compute: Compute) -> None:
    listed = compute.ok("GET", f"{Z}/machineTypes")
    assert [m["name"] for m in listed["items"]] == [
        "ct6e-standard-1t",
        "ct6e-standard-4t",
        "ct6e-standard-8t",
    ]
    mt = compute.ok("GET", "zones/us-central1-c/machineTypes/tpu7x-standard-4t")
    assert mt["guestCpus"] == 224 and mt["memoryMb"] == 960 * 1024
    assert mt["accelerators"] == [{"guestAcceleratorType": "tpu7x", "guestAcceleratorCount": 4}]
    status, missing = compute.call("GET", f"{Z}/machineTypes/tpu7x-standard-4t")
    assert status == 404
    image = compute.ok("GET", "../ubuntu-os-accelerator-images/global/images/family/"
                       "ubuntu-accel-2404-amd64-tpu-tpu7x")  # fmt: skip
    assert image["name"].startswith("ubuntu-accel-2404-amd64-tpu-tpu7x-v")
    assert (
        compute.call("GET", "../ubuntu-os-accelerator-images/global/images/family/nope")[0] == 404
    )


def test_beta_paths_are_served(emulator) -> None:
    beta = Compute(emulator.address, version="beta")
    op = beta.wait(beta.ok("POST", f"{Z}/instances", body()))
    assert "/compute/beta/" in op["targetLink"]
    beta.wait(beta.ok("DELETE", f"{Z}/instances/vm1"))


def test_instances_and_operations_outlive_a_restart(tmp_path) -> None:
    from tpuctl.emulator.compute.front import ComputeFront
    from tpuctl.emulator.services import Backend

    first = Backend(tmp_path)
    first.update_config({"durations": {"create": None}, "capacity": {ZONE: {"v6e": 0}}})
    op = ComputeFront(first).insert("v1", "p", ZONE, body())
    first.close()
    again = Backend(tmp_path)
    compute = ComputeFront(again)
    assert compute.get("v1", "p", ZONE, "vm1")["status"] == "PROVISIONING"
    again.advance()  # no capacity: the kept operation fails as it would have
    done = compute.get_operation("v1", "p", ZONE, op["name"])
    assert done["error"]["errors"][0]["code"] == "ZONE_RESOURCE_POOL_EXHAUSTED"
    assert again.all_instances() == []
    again.close()


def test_instances_and_tpu_nodes_share_the_zones_capacity(compute: Compute, emulator) -> None:
    emulator.capacity({ZONE: {"v6e": 8}})
    compute.wait(compute.ok("POST", f"{Z}/instances", body()))  # 4 chips
    tpu = emulator.tpu_client()
    parent = f"projects/p/locations/{ZONE}"
    node = {"accelerator_type": "v6e-8", "runtime_version": "v2-alpha-tpuv6e"}
    op = tpu.create_node(parent=parent, node_id="n8", node=node)
    with pytest.raises(GoogleAPICallError, match="There is no more capacity"):
        op.result(timeout=10)  # 4 + 8 > 8
    tpu.create_node(parent=parent, node_id="n4", node={**node, "accelerator_type": "v6e-4"}).result(
        timeout=10
    )
    # and the other way round: the node's 4 chips leave none for a second instance
    done = compute.wait(compute.ok("POST", f"{Z}/instances", body(name="vm2")))
    assert done["error"]["errors"][0]["code"] == "ZONE_RESOURCE_POOL_EXHAUSTED"
    tpu.delete_node(name=f"{parent}/nodes/n4").result(timeout=10)
    compute.wait(compute.ok("DELETE", f"{Z}/instances/vm1"))


def test_the_service_names_the_network_interfaces(compute: Compute) -> None:
    """`NetworkInterface.name` is output only: "The name of the network interface, which
    is generated by the server. For a VM, the network interface uses the nicN naming
    format" (the v1 reference, instances); a name in the request is not kept."""
    nics = [{"name": "mine", "network": "global/networks/default"},
            {"name": "eth7", "network": "global/networks/default"}]  # fmt: skip
    compute.wait(compute.ok("POST", f"{Z}/instances", body(networkInterfaces=nics)))
    vm = compute.ok("GET", f"{Z}/instances/vm1")
    assert [n["name"] for n in vm["networkInterfaces"]] == ["nic0", "nic1"]
    compute.wait(compute.ok("DELETE", f"{Z}/instances/vm1"))
