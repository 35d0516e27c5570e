"""Google's own Compute Engine client (google-cloud-compute, REST) against the emulator:
a single-host TPU VM and a multi-host slice (workload policy, regional template, MIG),
created, read, listed and deleted. Its `insert(...).result()` would poll Google's real
endpoint whatever the client's is (its operations client is built without the client's
options), so the unary calls and an operations client of our own are used, as one
would against any local endpoint."""

from __future__ import annotations

from typing import Any

import pytest

ZONE = "us-east1-d"
REGION = "us-east1"
PROJECT = "p"


@pytest.fixture
def clients(emulator) -> Any:
    from google.api_core.client_options import ClientOptions
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import compute_v1

    options = ClientOptions(api_endpoint=f"http://{emulator.address}")
    kw = {"credentials": AnonymousCredentials(), "client_options": options}

    class Clients:
        v1 = compute_v1
        instances = compute_v1.InstancesClient(**kw)
        zone_ops = compute_v1.ZoneOperationsClient(**kw)
        region_ops = compute_v1.RegionOperationsClient(**kw)
        policies = compute_v1.ResourcePoliciesClient(**kw)
        templates = compute_v1.RegionInstanceTemplatesClient(**kw)
        groups = compute_v1.InstanceGroupManagersClient(**kw)

        def zone_wait(self, op: Any) -> Any:
            done = self.zone_ops.wait(project=PROJECT, zone=ZONE, operation=op.name)
            assert done.status == compute_v1.Operation.Status.DONE and not done.error.errors
            return done

        def region_wait(self, op: Any) -> Any:
            done = self.region_ops.wait(project=PROJECT, region=REGION, operation=op.name)
            assert done.status == compute_v1.Operation.Status.DONE and not done.error.errors
            return done

    return Clients()


def _properties(c: Any, machine: str) -> dict[str, Any]:
    return {
        "machine_type": machine,
        "scheduling": c.v1.Scheduling(on_host_maintenance="TERMINATE"),
        "disks": [c.v1.AttachedDisk(
            boot=True, auto_delete=True, initialize_params=c.v1.AttachedDiskInitializeParams(
                source_image="projects/ubuntu-os-accelerator-images/global/images/family/"
                "ubuntu-accel-2204-amd64-tpu-v5e-v5p-v6e"))],
        "network_interfaces": [c.v1.NetworkInterface(network="global/networks/default")],
        "metadata": c.v1.Metadata(items=[c.v1.Items(key="enable-guest-attributes", value="TRUE")]),
    }  # fmt: skip


def test_the_compute_client_drives_a_single_host_vm(clients) -> None:
    c = clients
    body = c.v1.Instance(
        name="c1", **{**_properties(c, f"zones/{ZONE}/machineTypes/ct6e-standard-8t")}
    )
    c.zone_wait(c.instances.insert_unary(project=PROJECT, zone=ZONE, instance_resource=body))
    got = c.instances.get(project=PROJECT, zone=ZONE, instance="c1")
    assert got.status == "RUNNING" and got.machine_type.endswith("/ct6e-standard-8t")
    assert [i.name for i in c.instances.list(project=PROJECT, zone=ZONE)] == ["c1"]
    scoped = dict(c.instances.aggregated_list(project=PROJECT))
    assert [i.name for i in scoped[f"zones/{ZONE}"].instances] == ["c1"]
    keys = c.instances.get_guest_attributes(request=c.v1.GetGuestAttributesInstanceRequest(
        project=PROJECT, zone=ZONE, instance="c1", query_path="hostkeys/"))  # fmt: skip
    assert "ssh-ed25519" in [i.key for i in keys.query_value.items]
    c.zone_wait(c.instances.delete_unary(project=PROJECT, zone=ZONE, instance="c1"))
    assert list(c.instances.list(project=PROJECT, zone=ZONE)) == []


def test_the_compute_client_drives_a_slice(clients, emulator) -> None:
    c = clients
    policy = c.v1.ResourcePolicy(name="wp", workload_policy=c.v1.ResourcePolicyWorkloadPolicy(
        type_="HIGH_THROUGHPUT", accelerator_topology="4x4"))  # fmt: skip
    c.region_wait(c.policies.insert_unary(project=PROJECT, region=REGION,
                                          resource_policy_resource=policy))  # fmt: skip
    template = c.v1.InstanceTemplate(
        name="it", properties=c.v1.InstanceProperties(**_properties(c, "ct6e-standard-4t"))
    )
    c.region_wait(c.templates.insert_unary(project=PROJECT, region=REGION,
                                           instance_template_resource=template))  # fmt: skip
    group = c.v1.InstanceGroupManager(
        name="mig", base_instance_name="mig", target_size=4,
        instance_template=f"projects/{PROJECT}/regions/{REGION}/instanceTemplates/it",
        resource_policies=c.v1.InstanceGroupManagerResourcePolicies(
            workload_policy=f"projects/{PROJECT}/regions/{REGION}/resourcePolicies/wp"),
        instance_lifecycle_policy=c.v1.InstanceGroupManagerInstanceLifecyclePolicy(
            default_action_on_failure="DO_NOTHING"),
    )  # fmt: skip
    c.zone_wait(c.groups.insert_unary(project=PROJECT, zone=ZONE,
                                      instance_group_manager_resource=group))  # fmt: skip
    managed = list(c.groups.list_managed_instances(project=PROJECT, zone=ZONE,
                                                   instance_group_manager="mig"))  # fmt: skip
    assert len(managed) == 4 and {m.instance_status for m in managed} == {"RUNNING"}
    got = c.groups.get(project=PROJECT, zone=ZONE, instance_group_manager="mig")
    (topology,) = got.status.applied_accelerator_topologies
    assert (topology.accelerator_topology, topology.state) == ("4x4", "ACTIVE")
    assert got.status.is_stable
    c.zone_wait(c.groups.delete_unary(project=PROJECT, zone=ZONE, instance_group_manager="mig"))
    c.region_wait(c.templates.delete_unary(project=PROJECT, region=REGION,
                                           instance_template="it"))  # fmt: skip
    c.region_wait(c.policies.delete_unary(project=PROJECT, region=REGION, resource_policy="wp"))
    assert emulator.instances() == []


def test_a_flex_start_vm_waits_pending_then_runs(clients, emulator) -> None:
    """google-cloud-compute parses a flex-start VM waiting for capacity (status PENDING)
    and its insert's operation still RUNNING; capacity then makes it RUN."""
    c = clients
    emulator.capacity({ZONE: {"v6e": 0}})
    props = _properties(c, f"zones/{ZONE}/machineTypes/ct6e-standard-8t")
    props["scheduling"] = c.v1.Scheduling(
        on_host_maintenance="TERMINATE", provisioning_model="FLEX_START",
        instance_termination_action="DELETE", max_run_duration=c.v1.Duration(seconds=3600),
    )  # fmt: skip
    body = c.v1.Instance(
        name="flexy", params=c.v1.InstanceParams(
            request_valid_for_duration=c.v1.Duration(seconds=600)), **props,
    )  # fmt: skip
    op = c.instances.insert_unary(project=PROJECT, zone=ZONE, instance_resource=body)
    assert op.status == c.v1.Operation.Status.RUNNING
    vm = c.instances.get(project=PROJECT, zone=ZONE, instance="flexy")
    assert vm.status == "PENDING"
    assert vm.scheduling.provisioning_model == "FLEX_START"
    emulator.capacity({ZONE: {"v6e": None}})
    emulator.advance()
    c.zone_wait(op)
    assert c.instances.get(project=PROJECT, zone=ZONE, instance="flexy").status == "RUNNING"
    c.zone_wait(c.instances.delete_unary(project=PROJECT, zone=ZONE, instance="flexy"))
