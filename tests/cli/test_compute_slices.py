"""Multi-host TPU slices on Compute Engine with the same commands: `create` makes a
workload policy, an instance template and a managed instance group and waits until every
VM runs and the topology is ACTIVE; `list`/`describe` show the slice as one node with its
workers in worker order; `delete` removes the group, then the template, then the policy.
A create that fails or is interrupted half way leaves nothing behind."""

from __future__ import annotations

import json
import signal

import pytest

from tests.cli.conftest import Result, one_line_error, spawned
from tests.emulator.ssh_helpers import wait_until

ZONE = "us-east1-d"  # v6e here
SLICE = ("-a", "v6e-16", "--api", "compute", "--zone", ZONE)


def _kinds(emulator) -> list[str]:
    return sorted(r["status"] if r["status"].isupper() and "_" in r["status"] else "INSTANCE"
                  for r in emulator.instances())  # fmt: skip


def test_a_v6e_16_slice_is_made_listed_described_and_deleted_whole(cli, emulator) -> None:
    made = cli("create", "b", *SLICE, "--json")
    assert made.code == 0, made.err
    node = json.loads(made.out)
    assert (node["api"], node["acceleratorType"], node["state"]) == ("compute", "v6e-16", "READY")
    assert len(node["workers"]) == 4
    assert _kinds(emulator) == ["INSTANCE"] * 4 + [
        "INSTANCE_GROUP_MANAGER", "INSTANCE_TEMPLATE", "WORKLOAD_POLICY"]  # fmt: skip
    (policy,) = emulator.bodies("compute.resourcePolicies.insert")
    assert policy["body"]["workloadPolicy"] == {"type": "HIGH_THROUGHPUT",
                                                "acceleratorTopology": "4x4"}  # fmt: skip
    (group,) = emulator.bodies("compute.instanceGroupManagers.insert")
    assert group["body"]["targetSize"] == 4
    assert group["body"]["instanceLifecyclePolicy"] == {"defaultActionOnFailure": "DO_NOTHING"}

    text = cli("describe", "b", "--zone", ZONE).out
    assert "topology" in text and "4x4 ACTIVE" in text and "Compute Engine" in text
    shown = json.loads(cli("describe", "b", "--zone", ZONE, "--json").out)
    assert shown["topology"] == "4x4 ACTIVE"
    vms = shown["raw"]["instances"]
    numbers = [{i["key"]: i["value"] for i in vm["metadata"]["items"]}["worker-id"] for vm in vms]
    assert numbers == ["0", "1", "2", "3"]  # worker order, not the names' random order
    assert [w["internalIp"] for w in shown["workers"]] == [
        vm["networkInterfaces"][0]["networkIP"] for vm in vms]  # fmt: skip

    assert cli("create", "single", "-a", "v6e-8", "--api", "compute", "--zone", ZONE).code == 0
    listed = cli("list", "--zone", ZONE)
    header, *rows = listed.out.strip().splitlines()
    assert header.split()[:5] == ["NAME", "ZONE", "ACCELERATOR", "API", "STATE"]
    assert sorted(r.split()[:5] for r in rows) == [
        ["b", ZONE, "v6e-16", "compute", "READY"],
        ["single", ZONE, "v6e-8", "compute", "READY"],
    ]

    gone = cli("delete", "b", "single", "--zone", ZONE, "--yes")
    assert gone.code == 0, gone.err
    assert "b: deleted" in gone.out and "single: deleted" in gone.out
    assert emulator.instances() == []


def test_a_worker_of_a_slice_is_not_a_node_of_its_own(cli, emulator) -> None:
    assert cli("create", "w", *SLICE).code == 0
    worker = next(r["name"] for r in emulator.instances() if "/instances/" in r["name"])
    r = cli("delete", worker.rsplit("/", 1)[-1], "--zone", ZONE, "--yes")
    assert r.code == 2 and "of the slice w, not a node of its own" in one_line_error(r)
    assert len(emulator.instances()) == 7  # nothing deleted
    assert cli("delete", "w", "--zone", ZONE, "--yes").code == 0


def test_a_slice_is_labelled_on_every_vm(cli, emulator) -> None:
    """A slice's labels are its VMs' (`keep`, and `run --node` naming its job, set them)."""

    def kept() -> list[str | None]:  # each VM's label, as the API has it
        shown = json.loads(cli("describe", "k", "--zone", ZONE, "--json").out)
        return [(vm.get("labels") or {}).get("tpuctl-keep") for vm in shown["raw"]["instances"]]

    assert cli("create", "k", *SLICE).code == 0
    try:
        r = cli("keep", "k", "--zone", ZONE)
        assert r.code == 0, r.err
        assert kept() == ["true"] * 4
        assert cli("keep", "k", "--off", "--zone", ZONE).code == 0
        assert kept() == [None] * 4
    finally:
        assert cli("delete", "k", "--zone", ZONE, "--yes").code == 0


def test_no_capacity_for_the_slice_leaves_nothing_behind(cli, emulator) -> None:
    emulator.capacity({ZONE: {"v6e": 8}})  # half the slice
    r = cli("create", "big", *SLICE)
    assert r.code != 0
    assert "no capacity" in r.err and "does not have enough resources" in r.err
    assert f"deleted big in {ZONE}" in r.err
    assert emulator.instances() == []


@pytest.mark.parametrize("step", ["resourcePolicies", "instanceTemplates", "instanceGroupManagers"])
def test_a_refusal_at_each_step_leaves_nothing_behind(cli, emulator, step) -> None:
    # the step's insert (POST to its collection) is refused for quota
    emulator.faults(rate=1.0, codes=[429], quota=True, paths=f"/{step}(\\?|$)")
    r = cli("create", "refused", *SLICE)
    emulator.faults()
    assert r.code != 0 and "quota" in r.err.lower(), r.err
    assert emulator.instances() == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_vms_come_up_deletes_the_half_made_slice(cli, emulator, sig) -> None:
    emulator.config(durations={"create": None})  # the VMs stay PROVISIONING
    with spawned("create", "half", *SLICE) as p:
        p.wait_for(f"creating half (v6e-16) in {ZONE}: CREATING")
        p.proc.send_signal(sig)
    assert p.proc.returncode == 130, p.err
    assert one_line_error(Result(130, "", p.err), after_call=True) == (
        "error: interrupted; deleted what the create of half had made"
    )
    assert f"deleted half in {ZONE}" in p.err
    assert emulator.instances() == []


def test_exec_answers_from_every_vm_of_a_slice_in_worker_order(cli, emulator) -> None:
    assert cli("create", "x", *SLICE).code == 0
    try:
        # a Compute Engine VM's shell has no TPU_WORKER_ID (`tpuctl run` sets it, agent/job.py)
        r = cli("exec", "x", "--zone", ZONE, "--", "sh", "-c", 'echo "${TPU_WORKER_ID-unset}"')
        assert r.code == 0, r.err
        assert sorted(r.out.splitlines()) == [f"[w{k}] unset" for k in range(4)]
        # each worker's metadata server says its number, as the VM's own metadata does
        script = ('python3 -c "import os,urllib.request as u;print(u.urlopen(u.Request('
                  "os.environ['TPUCTL_METADATA_URL']+'/instance/attributes/worker-id',"
                  "headers={'Metadata-Flavor':'Google'})).read().decode())\"")  # fmt: skip
        r = cli("exec", "x", "--zone", ZONE, "--", "sh", "-c", script)
        assert r.code == 0, r.err
        assert sorted(r.out.splitlines()) == [f"[w{k}] {k}" for k in range(4)]
    finally:
        assert cli("delete", "x", "--zone", ZONE, "--yes").code == 0


def test_a_spot_slice_asks_spot_for_every_vm(cli, emulator) -> None:
    r = cli("create", "cheap", *SLICE, "--spot", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["scheduling"] == "spot"
    (template,) = emulator.bodies("compute.regionInstanceTemplates.insert")
    scheduling = template["body"]["properties"]["scheduling"]
    assert (scheduling["provisioningModel"], scheduling["instanceTerminationAction"]) == (
        "SPOT", "DELETE")  # fmt: skip
    assert scheduling["automaticRestart"] is False
    assert cli("delete", "cheap", "--zone", ZONE, "--yes").code == 0


@pytest.mark.parametrize(
    ("verb", "left"),
    [("compute.resourcePolicies.insert", {"WORKLOAD_POLICY"}),
     ("compute.regionInstanceTemplates.insert", {"WORKLOAD_POLICY", "INSTANCE_TEMPLATE"}),
     ("compute.instanceGroupManagers.insert",
      {"WORKLOAD_POLICY", "INSTANCE_TEMPLATE", "INSTANCE_GROUP_MANAGER"})],
    ids=["policy", "template", "group"],
)  # fmt: skip
def test_a_create_killed_at_each_step_is_cleaned_by_delete(cli, emulator, verb, left) -> None:
    """SIGKILL cannot be caught: what the create had asked for stays. `tpuctl delete NAME`
    finds it by the slice's name (a policy or template alone shows as a TERMINATED node
    with no VMs) and removes all of it."""
    emulator.faults(delay=1.0)
    try:
        with spawned("create", "killed", *SLICE) as p:
            wait_until(lambda: emulator.requests().get(f"POST {verb}", 0) > 0, verb, timeout=60)
            p.proc.kill()
    finally:
        emulator.faults()
    wait_until(lambda: left <= {r["status"] for r in emulator.instances()}, "the call to land")
    shown = json.loads(cli("describe", "killed", "--zone", ZONE, "--json").out)
    assert shown["state"] in ("TERMINATED", "CREATING", "READY")
    gone = cli("delete", "killed", "--zone", ZONE, "--yes")
    assert gone.code == 0, gone.err
    assert emulator.instances() == []
