"""gcloud's commands for the three resources of a multi-host TPU slice on Compute Engine
(a workload policy, an instance template, a managed instance group) against the
emulator, as a user following Google's guides types them."""

from __future__ import annotations

import json

from tests.emulator.test_gcloud import gcloud
from tests.emulator.test_gcloud_compute import IMAGE, ZONE, configured  # noqa: F401

REGION = ZONE.rsplit("-", 1)[0]
POLICY = f"projects/p/regions/{REGION}/resourcePolicies/wp1"
TEMPLATE = f"projects/p/regions/{REGION}/instanceTemplates/t1"


def _ok(*args: str) -> str:
    done = gcloud(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _make_slice() -> None:
    _ok("compute", "resource-policies", "create", "workload-policy", "wp1", "--region", REGION,
        "--type", "HIGH_THROUGHPUT", "--accelerator-topology", "4x4")  # fmt: skip
    _ok("compute", "instance-templates", "create", "t1", "--instance-template-region", REGION,
        "--machine-type", "ct6e-standard-4t", "--maintenance-policy", "TERMINATE", *IMAGE,
        "--labels", "tpuctl=test")  # fmt: skip
    _ok("compute", "instance-groups", "managed", "create", "m1", "--zone", ZONE,
        "--template", TEMPLATE, "--size", "4", "--workload-policy", POLICY,
        "--default-action-on-vm-failure", "do-nothing")  # fmt: skip


def test_gcloud_makes_lists_and_deletes_a_slice(configured) -> None:  # noqa: F811
    _make_slice()
    policy = json.loads(_ok("compute", "resource-policies", "describe", "wp1", "--region", REGION,
                            "--format", "json"))  # fmt: skip
    assert policy["workloadPolicy"] == {"type": "HIGH_THROUGHPUT", "acceleratorTopology": "4x4",
                                        "acceleratorTopologyMode": "AUTO_CONNECT"}  # fmt: skip
    listed = _ok("compute", "instance-groups", "managed", "list-instances", "m1", "--zone", ZONE,
                 "--format", "json")  # fmt: skip
    vms = json.loads(listed)
    assert len(vms) == 4 and all(v["instanceStatus"] == "RUNNING" for v in vms)
    group = json.loads(_ok("compute", "instance-groups", "managed", "describe", "m1", "--zone",
                           ZONE, "--format", "json"))  # fmt: skip
    assert group["status"]["appliedAcceleratorTopologies"] == [
        {"acceleratorTopology": "4x4", "state": "ACTIVE"}
    ]
    assert group["status"]["isStable"] is True
    assert group["instanceLifecyclePolicy"]["defaultActionOnFailure"] == "DO_NOTHING"
    instances = json.loads(_ok("compute", "instances", "list", "--format", "json"))
    assert sorted(i["labels"]["tpuctl"] for i in instances) == ["test"] * 4
    workers = sorted(
        {i["key"]: i["value"] for i in vm["metadata"]["items"]}["worker-id"] for vm in instances
    )
    assert workers == ["0", "1", "2", "3"]
    assert "m1" in _ok("compute", "instance-groups", "managed", "list")
    assert "t1" in _ok("compute", "instance-templates", "list")

    # in use: the template and the policy cannot go before the group
    refused = gcloud("compute", "instance-templates", "delete", "t1", "--region", REGION,
                     "--quiet")  # fmt: skip
    assert refused.returncode != 0 and "is already being used by" in refused.stderr
    refused = gcloud("compute", "resource-policies", "delete", "wp1", "--region", REGION, "--quiet")
    assert refused.returncode != 0 and "is already being used by" in refused.stderr

    _ok("compute", "instance-groups", "managed", "delete", "m1", "--zone", ZONE, "--quiet")
    _ok("compute", "instance-templates", "delete", "t1", "--region", REGION, "--quiet")
    _ok("compute", "resource-policies", "delete", "wp1", "--region", REGION, "--quiet")
    assert configured.instances() == []
    assert _ok("compute", "instance-groups", "managed", "list", "--format", "value(name)") == ""
    assert _ok("compute", "instance-templates", "list", "--format", "value(name)") == ""
    assert _ok("compute", "resource-policies", "list", "--format", "value(name)") == ""
