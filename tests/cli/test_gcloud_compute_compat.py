"""The same intent sent by gcloud and by tpuctl to Compute Engine: a single-host TPU VM's
`instances.insert` bodies agree on every field that matters.

gcloud is given what tpuctl states unasked (the TPU OS image, the maintenance policy a
TPU VM needs, a 100 GB boot disk, gVNIC, the cloud-platform scope, guest attributes for
the host keys); tpuctl's own labels are taken out. Names, ids and times are not compared.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.emulator.compute_helpers import Compute
from tests.emulator.test_gcloud import gcloud, gcloud_config

ZONE = "us-central1-c"
PROJECT = "tpuctl-demo"
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"


@pytest.fixture
def gcloud_on_compute(emulator):
    gcloud_config(
        {
            "api_endpoint_overrides/compute": f"http://{emulator.address}/",
            "auth/disable_credentials": "true",
            "project": PROJECT,
        }
    )
    yield
    compute = Compute(emulator.address, PROJECT)
    for instance in emulator.instances():  # what a test left (REST: gcloud costs ~1 s of CPU)
        name = instance["name"].rsplit("/", 1)[-1]
        if name in ("g1", "t1"):
            compute.wait(compute.ok("DELETE", f"zones/{ZONE}/instances/{name}"))


def _insert(emulator, name: str) -> dict[str, Any]:  # noqa: ANN001
    for entry in reversed(emulator.bodies("compute.instances.insert")):
        if entry["body"].get("name") == name:
            return dict(entry["body"])
    raise AssertionError(f"no insert of {name}: {emulator.bodies()}")


def _intent(body: dict[str, Any]) -> dict[str, Any]:
    """What a body asks for, in one form: defaults and tpuctl's own labels left out."""
    disk = body["disks"][0]
    params = disk.get("initializeParams") or {}
    nic = body["networkInterfaces"][0]
    items = (body.get("metadata") or {}).get("items") or []
    # gcloud names the family through its zonal view (.../zones/-/imageFamilyViews/F)
    image = str(params.get("sourceImage", "")).split("/projects/", 1)[-1].removeprefix("projects/")
    project, family = image.split("/", 1)[0], image.rsplit("/", 1)[-1]
    return {
        "machineType": body["machineType"].rsplit("/", 1)[-1],
        "boot": (disk.get("boot"), disk.get("autoDelete"), project, family,
                 str(params.get("diskSizeGb"))),
        "nic": (nic.get("nicType"), [a.get("type") for a in nic.get("accessConfigs") or []]),
        "scheduling": {k: v for k, v in (body.get("scheduling") or {}).items()
                       if v not in (None, False, "")},
        "accounts": [(a.get("email"), sorted(a.get("scopes") or []))
                     for a in body.get("serviceAccounts") or []],
        "metadata": sorted((i["key"], i["value"]) for i in items),
        "labels": {k: v for k, v in (body.get("labels") or {}).items()
                   if k != "managed-by" and not k.startswith("tpuctl-")},
        # gcloud leaves out an empty `values`
        "reservation": {k: v for k, v in (body.get("reservationAffinity") or {}).items() if v},
    }  # fmt: skip


@pytest.mark.parametrize(
    ("gcloud_flags", "tpuctl_flags"),
    [([], []),
     (["--provisioning-model", "SPOT", "--instance-termination-action", "DELETE",
       "--no-restart-on-failure"], ["--spot"]),
     (["--max-run-duration", "1h", "--instance-termination-action", "DELETE"], ["--ttl", "1h"]),
     # FLEX_START is in gcloud 528's alpha track only
     (["--provisioning-model", "FLEX_START", "--max-run-duration", "4h",
       "--instance-termination-action", "DELETE"], ["--flex-start", "--max-run-duration", "4h"]),
     (["--reservation-affinity", "specific", "--reservation", "mine"], ["--reservation", "mine"]),
     (["--reservation-affinity", "any"], ["--reserved"])],
    ids=["standard", "spot", "ttl", "flex-start", "reservation", "any-reservation"],
)  # fmt: skip
def test_create_a_tpu7x_vm(cli, emulator, gcloud_on_compute, gcloud_flags, tpuctl_flags) -> None:
    emulator.reservation(ZONE, "mine", "tpu7x-standard-4t", count=2, specific=True)
    track = ["alpha"] if "FLEX_START" in gcloud_flags else []
    theirs = gcloud(
        *track, "compute", "instances", "create", "g1", "--zone", ZONE,
        "--machine-type", "tpu7x-standard-4t", "--maintenance-policy", "TERMINATE",
        "--image-family", "ubuntu-accel-2404-amd64-tpu-tpu7x",
        "--image-project", "ubuntu-os-accelerator-images", "--boot-disk-size", "100GB",
        "--network-interface", "nic-type=GVNIC", "--scopes", "cloud-platform",
        "--labels", "team=ml", "--metadata", "k=v,enable-guest-attributes=TRUE",
        *gcloud_flags,
    )  # fmt: skip
    assert theirs.returncode == 0, theirs.stderr
    r = cli("create", "t1", "-a", "tpu7x-8", "--zone", ZONE, "--labels", "team=ml",
            "--metadata", "k=v", *tpuctl_flags)  # fmt: skip
    assert r.code == 0, r.err
    mine = _insert(emulator, "t1")
    assert _intent(mine) == _intent(_insert(emulator, "g1"))
    if "--flex-start" in tpuctl_flags:
        # how long the insert waits: gcloud 528 predates --request-valid-for-duration, whose
        # longest value (2h) tpuctl sends when --valid-until is not given
        assert mine["params"] == {"requestValidForDuration": {"seconds": "7200"}}


SLICE_ZONE = "us-east1-d"
REGION = "us-east1"


def _body(emulator, verb: str, name: str) -> dict[str, Any]:  # noqa: ANN001
    for entry in reversed(emulator.bodies(verb)):
        if entry["body"].get("name") == name:
            return dict(entry["body"])
    raise AssertionError(f"no {verb} of {name}")


def _path(value: str) -> str:
    """A resource's path, from its full or partial URL (names left out)."""
    return "/".join(value.split("projects/", 1)[-1].split("/")[1:-1])


def test_create_a_v6e_16_slice(cli, emulator, gcloud_on_compute) -> None:
    """A workload policy, a regional template and a MIG: what gcloud sends for
    Google's multi-host guide and what tpuctl sends for `-a v6e-16 --api compute`."""
    steps = [
        ("compute", "resource-policies", "create", "workload-policy", "gp", "--region", REGION,
         "--type", "HIGH_THROUGHPUT", "--accelerator-topology", "4x4"),
        ("compute", "instance-templates", "create", "gt", "--instance-template-region", REGION,
         "--machine-type", "ct6e-standard-4t", "--maintenance-policy", "TERMINATE",
         "--image-family", "ubuntu-accel-2204-amd64-tpu-v5e-v5p-v6e",
         "--image-project", "ubuntu-os-accelerator-images", "--boot-disk-size", "100GB",
         "--network-interface", "nic-type=GVNIC", "--scopes", "cloud-platform",
         "--labels", "team=ml", "--metadata", "enable-guest-attributes=TRUE"),
        ("compute", "instance-groups", "managed", "create", "gm", "--zone", SLICE_ZONE,
         "--template", f"projects/{PROJECT}/regions/{REGION}/instanceTemplates/gt", "--size", "4",
         "--workload-policy", f"projects/{PROJECT}/regions/{REGION}/resourcePolicies/gp",
         "--default-action-on-vm-failure", "do-nothing"),
    ]  # fmt: skip
    try:
        for step in steps:
            done = gcloud(*step)
            assert done.returncode == 0, done.stderr
        r = cli("create", "tm", "-a", "v6e-16", "--api", "compute", "--zone", SLICE_ZONE,
                "--labels", "team=ml")  # fmt: skip
        assert r.code == 0, r.err
        ours = _body(emulator, "compute.resourcePolicies.insert", "tm-d-wp")
        theirs = _body(emulator, "compute.resourcePolicies.insert", "gp")
        assert ours["workloadPolicy"] == theirs["workloadPolicy"]
        assert ours["region"] == theirs["region"]
        ours = _body(emulator, "compute.regionInstanceTemplates.insert", "tm-d-it")
        theirs = _body(emulator, "compute.regionInstanceTemplates.insert", "gt")
        # a template's machine type is a bare name; the rest is an instance's body
        mine, gclouds = ours["properties"], theirs["properties"]
        assert mine["machineType"] == gclouds["machineType"] == "ct6e-standard-4t"
        assert _intent({**mine, "machineType": "x"}) == _intent({**gclouds, "machineType": "x"})
        ours = _body(emulator, "compute.instanceGroupManagers.insert", "tm")
        theirs = _body(emulator, "compute.instanceGroupManagers.insert", "gm")
        for key in ("targetSize", "instanceLifecyclePolicy", "zone"):
            assert ours[key] == theirs[key], key
        assert _path(ours["instanceTemplate"]) == _path(theirs["instanceTemplate"])
        assert _path(ours["resourcePolicies"]["workloadPolicy"]) == _path(
            theirs["resourcePolicies"]["workloadPolicy"]
        )
    finally:
        gcloud("compute", "instance-groups", "managed", "delete", "gm", "--zone", SLICE_ZONE,
               "--quiet")  # fmt: skip
        gcloud("compute", "instance-templates", "delete", "gt", "--region", REGION, "--quiet")
        gcloud("compute", "resource-policies", "delete", "gp", "--region", REGION, "--quiet")
        cli("delete", "tm", "--zone", SLICE_ZONE, "--yes")


def test_create_a_flex_start_v6e_16_slice(cli, emulator, gcloud_on_compute) -> None:
    """A flex-start slice: the template's flex-start scheduling and the group's bulk mode,
    as gcloud's alpha track sends them (gcloud 528 has FLEX_START and
    --target-size-policy-mode there only)."""
    steps = [
        ("alpha", "compute", "resource-policies", "create", "workload-policy", "fp",
         "--region", REGION, "--type", "HIGH_THROUGHPUT", "--accelerator-topology", "4x4"),
        ("alpha", "compute", "instance-templates", "create", "ft",
         "--instance-template-region", REGION, "--machine-type", "ct6e-standard-4t",
         "--maintenance-policy", "TERMINATE",
         "--image-family", "ubuntu-accel-2204-amd64-tpu-v5e-v5p-v6e",
         "--image-project", "ubuntu-os-accelerator-images", "--boot-disk-size", "100GB",
         "--network-interface", "nic-type=GVNIC", "--scopes", "cloud-platform",
         "--metadata", "enable-guest-attributes=TRUE", "--provisioning-model", "FLEX_START",
         "--max-run-duration", "4h", "--instance-termination-action", "DELETE"),
        ("alpha", "compute", "instance-groups", "managed", "create", "fm", "--zone", SLICE_ZONE,
         "--template", f"projects/{PROJECT}/regions/{REGION}/instanceTemplates/ft",
         "--size", "4", "--target-size-policy-mode", "bulk",
         "--workload-policy", f"projects/{PROJECT}/regions/{REGION}/resourcePolicies/fp",
         "--default-action-on-vm-failure", "do-nothing"),
    ]  # fmt: skip
    try:
        for step in steps:
            done = gcloud(*step)
            assert done.returncode == 0, done.stderr
        r = cli("create", "fs", "-a", "v6e-16", "--api", "compute", "--zone", SLICE_ZONE,
                "--flex-start", "--max-run-duration", "4h")  # fmt: skip
        assert r.code == 0, r.err
        ours = _body(emulator, "compute.regionInstanceTemplates.insert", "fs-d-it")
        theirs = _body(emulator, "compute.regionInstanceTemplates.insert", "ft")
        mine, gclouds = ours["properties"], theirs["properties"]
        assert _intent({**mine, "machineType": "x"}) == _intent({**gclouds, "machineType": "x"})
        ours = _body(emulator, "compute.instanceGroupManagers.insert", "fs")
        theirs = _body(emulator, "compute.instanceGroupManagers.insert", "fm")
        for key in ("targetSize", "instanceLifecyclePolicy", "targetSizePolicy"):
            assert ours[key] == theirs[key], key
    finally:
        gcloud("compute", "instance-groups", "managed", "delete", "fm", "--zone", SLICE_ZONE,
               "--quiet")  # fmt: skip
        gcloud("compute", "instance-templates", "delete", "ft", "--region", REGION, "--quiet")
        gcloud("compute", "resource-policies", "delete", "fp", "--region", REGION, "--quiet")
        cli("delete", "fs", "--zone", SLICE_ZONE, "--yes")


def test_gcloud_reads_the_refusal_of_an_unknown_reservation(emulator, gcloud_on_compute) -> None:
    r = gcloud(
        "compute", "instances", "create", "g1", "--zone", ZONE,
        "--machine-type", "tpu7x-standard-4t", "--maintenance-policy", "TERMINATE",
        "--reservation-affinity", "specific", "--reservation", "nope",
    )  # fmt: skip
    assert r.returncode != 0
    assert "Could not find the given reservation with the following name: nope" in r.stderr
    assert emulator.instances() == []
