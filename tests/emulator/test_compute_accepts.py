"""What Compute Engine accepts, the emulator accepts too, as Google's own client
(google-cloud-compute) and gcloud see it: a VM made from a TPU instance template
(`sourceInstanceTemplate`, Google's `create_from_template` sample), a VM's
`reservationAffinity` read back, a Spot VM with no maintenance policy (TERMINATE is
Spot's default and only value), a template of a machine type without accelerators that
live-migrates, and a zone that does not exist answered 404 as Compute answers it."""

from __future__ import annotations

import json

import pytest

from tests.emulator.test_compute_client import PROJECT, ZONE, _properties, clients
from tests.emulator.test_gcloud import gcloud
from tests.emulator.test_gcloud_compute import IMAGE, configured

__all__ = ["clients", "configured"]  # the fixtures, shared


def test_a_vm_made_from_a_tpu_template_takes_its_properties(clients, emulator) -> None:
    from google.auth.credentials import AnonymousCredentials

    c = clients
    templates = c.v1.InstanceTemplatesClient(  # a global template
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": f"http://{emulator.address}"},
    )
    props = _properties(c, "ct6e-standard-8t")
    props["labels"] = {"team": "ml"}
    template = c.v1.InstanceTemplate(name="tpl", properties=c.v1.InstanceProperties(**props))
    op = templates.insert_unary(project=PROJECT, instance_template_resource=template)
    assert op.status == c.v1.Operation.Status.DONE
    # as Google's create_from_template sample asks: the name, and the template's URL
    request = c.v1.InsertInstanceRequest(
        project=PROJECT,
        zone=ZONE,
        source_instance_template=f"projects/{PROJECT}/global/instanceTemplates/tpl",
        instance_resource=c.v1.Instance(name="from-tpl"),
    )
    c.zone_wait(c.instances.insert_unary(request=request))
    vm = c.instances.get(project=PROJECT, zone=ZONE, instance="from-tpl")
    assert vm.machine_type.endswith(f"/zones/{ZONE}/machineTypes/ct6e-standard-8t")
    assert vm.labels == {"team": "ml"} and vm.scheduling.on_host_maintenance == "TERMINATE"
    c.zone_wait(c.instances.delete_unary(project=PROJECT, zone=ZONE, instance="from-tpl"))
    templates.delete_unary(project=PROJECT, instance_template="tpl")
    assert emulator.instances() == []


def test_a_vms_reservation_affinity_is_read_back(clients, emulator) -> None:
    c = clients
    emulator.reservation(ZONE, "mine", "ct6e-standard-8t", count=1, specific=True, project=PROJECT)
    affinity = c.v1.ReservationAffinity(
        consume_reservation_type="SPECIFIC_RESERVATION",
        key="compute.googleapis.com/reservation-name",
        values=["mine"],
    )
    body = c.v1.Instance(
        name="rv",
        reservation_affinity=affinity,
        **_properties(c, f"zones/{ZONE}/machineTypes/ct6e-standard-8t"),
    )
    c.zone_wait(c.instances.insert_unary(project=PROJECT, zone=ZONE, instance_resource=body))
    got = c.instances.get(project=PROJECT, zone=ZONE, instance="rv").reservation_affinity
    assert got.consume_reservation_type == "SPECIFIC_RESERVATION"
    assert list(got.values) == ["mine"] and got.key == "compute.googleapis.com/reservation-name"
    c.zone_wait(c.instances.delete_unary(project=PROJECT, zone=ZONE, instance="rv"))
    emulator.reservation(ZONE, "mine", "ct6e-standard-8t", count=0, project=PROJECT)


def test_gcloud_makes_a_spot_tpu_vm_with_no_maintenance_policy(configured) -> None:
    made = gcloud(
        "compute", "instances", "create", "spot1", "--zone", ZONE,
        "--machine-type", "ct6e-standard-8t", *IMAGE,
        "--provisioning-model", "SPOT", "--instance-termination-action", "DELETE",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    (insert,) = configured.bodies("compute.instances.insert")
    assert "onHostMaintenance" not in insert["body"].get("scheduling", {})  # not sent
    shown = gcloud("compute", "instances", "describe", "spot1", "--zone", ZONE, "--format", "json")
    assert json.loads(shown.stdout)["scheduling"]["onHostMaintenance"] == "TERMINATE"
    gone = gcloud("compute", "instances", "delete", "spot1", "--zone", ZONE, "--quiet")
    assert gone.returncode == 0, gone.stderr


@pytest.mark.parametrize("scheduling", [[], ["--maintenance-policy", "TERMINATE"]])
def test_gcloud_makes_a_template_of_a_machine_type_without_accelerators(
    configured, scheduling: list[str]
) -> None:
    """e2-standard-4 live-migrates (MIGRATE, the default) or not: the accelerator rule is
    a TPU machine type's."""
    made = gcloud("compute", "instance-templates", "create", "e2t",
                  "--machine-type", "e2-standard-4", *IMAGE, *scheduling)  # fmt: skip
    assert made.returncode == 0, made.stderr
    gone = gcloud("compute", "instance-templates", "delete", "e2t", "--quiet")
    assert gone.returncode == 0, gone.stderr
    refused = gcloud("compute", "instance-templates", "create", "tput",
                     "--machine-type", "ct6e-standard-8t", *IMAGE)  # fmt: skip
    assert refused.returncode != 0
    assert "Instances with guest accelerators do not support live migration." in refused.stderr


def test_a_zone_that_does_not_exist_is_not_found_and_a_region_an_unknown_zone(
    configured,
) -> None:
    missing = gcloud("compute", "instances", "describe", "vm", "--zone", "us-east1-a")
    assert missing.returncode != 0
    assert "The resource 'projects/p/zones/us-east1-a' was not found" in missing.stderr
    region = gcloud("compute", "instances", "describe", "vm", "--zone", "us-east1")
    assert region.returncode != 0
    assert "Invalid value for field 'zone': 'us-east1'. Unknown zone." in region.stderr
