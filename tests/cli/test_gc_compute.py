"""tpuctl gc on Compute Engine: TPU VMs by their labels, and what a create killed half way
left of a slice (a template and a policy with no group, a group with no VM) by the names
and the description tpuctl gave them, never anything else; a leftover young enough to be
a create under way stays."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import requests

from tests.cli.conftest import spawned
from tests.emulator.ssh_helpers import wait_until

ZONE = "us-east1-d"
REGION = "us-east1"
P = "projects/tpuctl-demo"
SLICE = ("-a", "v6e-16", "--api", "compute", "--zone", ZONE)
HOUR = 3600.0


def _kinds(emulator) -> list[str]:  # noqa: ANN001
    return sorted(r["status"] for r in emulator.instances() if r["status"] != "RUNNING")


def _paths(emulator) -> list[str]:  # noqa: ANN001
    return sorted(r["name"].split("/", 2)[-1] for r in emulator.instances())


def _insert(emulator, collection: str, body: dict[str, Any]) -> None:  # noqa: ANN001
    """Make a resource straight through the API, as someone else would."""
    r = requests.post(f"http://{emulator.address}/compute/v1/{P}/{collection}", json=body,
                      timeout=30)  # fmt: skip
    assert r.status_code == 200, r.text
    emulator.advance()


def set_label(emulator, name: str, key: str, value: str, zone: str = ZONE) -> None:  # noqa: ANN001
    """Edit a label of the VM instance `name` as another client would."""
    url = f"http://{emulator.address}/compute/v1/{P}/zones/{zone}/instances/{name}"
    current = requests.get(url, timeout=30).json()
    labels = {**current["labels"], key: value}
    r = requests.post(
        f"{url}/setLabels",
        timeout=30,
        json={"labels": labels, "labelFingerprint": current["labelFingerprint"]},
    )
    assert r.status_code == 200, r.text
    emulator.advance()


def _foreign(emulator) -> None:  # noqa: ANN001
    """A template and a policy named like a slice's, but not described as tpuctl's."""
    _insert(emulator, f"regions/{REGION}/resourcePolicies", {
        "name": "half-d-wp2", "description": "someone's policy",
        "workloadPolicy": {"type": "HIGH_THROUGHPUT", "acceleratorTopology": "4x4"}})  # fmt: skip
    _insert(emulator, f"regions/{REGION}/resourcePolicies", {
        "name": "their-d-wp", "description": "tpuctl: workload policy of TPU slice mine in "
        "us-east1-d", "workloadPolicy": {"type": "HIGH_THROUGHPUT",
                                          "acceleratorTopology": "4x4"}})  # fmt: skip
    for name in ("half-d-wp2", "their-d-wp"):
        emulator.compute_age(f"{P}/regions/{REGION}/resourcePolicies/{name}", 2 * HOUR)


def _kill_between_policy_and_group(emulator) -> None:  # noqa: ANN001
    """A create of the slice `half` SIGKILLed after its policy and template, before its
    group: the group's insert fails (503, retried) until the kill."""
    emulator.faults(rate=1.0, codes=[503], paths=r"/instanceGroupManagers(\?|$)")
    with spawned("create", "half", *SLICE) as p:
        wait_until(lambda: "INSTANCE_TEMPLATE" in _kinds(emulator), "the template", 60)
        p.proc.send_signal(signal.SIGKILL)
    emulator.faults()
    assert p.proc.returncode == -signal.SIGKILL
    assert "INSTANCE_GROUP_MANAGER" not in _kinds(emulator)


def test_a_create_killed_before_its_group_leaves_what_gc_collects_and_nothing_else(
    cli, emulator
) -> None:
    _foreign(emulator)
    try:
        _killed_create_is_collected(cli, emulator)
    finally:
        for name in ("half-d-wp2", "their-d-wp"):
            requests.delete(f"http://{emulator.address}/compute/v1/{P}/regions/{REGION}/"
                            f"resourcePolicies/{name}", timeout=30)  # fmt: skip
        emulator.advance()


def _killed_create_is_collected(cli, emulator) -> None:  # noqa: ANN001
    _kill_between_policy_and_group(emulator)
    left = [f"regions/{REGION}/instanceTemplates/half-d-it",
            f"regions/{REGION}/resourcePolicies/half-d-wp"]  # fmt: skip
    foreign = [f"regions/{REGION}/resourcePolicies/half-d-wp2",
               f"regions/{REGION}/resourcePolicies/their-d-wp"]  # fmt: skip
    assert _paths(emulator) == sorted(left + foreign)

    # young: may be a create still under way on another machine
    young = cli("gc", "--dry-run")
    assert young.code == 0, young.err
    assert "keep half (us-east1-d, instance template half-d-it and workload policy half-d-wp)" \
        in young.err and "may be a create under way" in young.err  # fmt: skip
    assert "nothing to collect" in young.err

    for path in left:
        emulator.compute_age(f"{P}/{path}", HOUR)
    dry = cli("gc", "--dry-run", "--json")
    assert dry.code == 0, dry.err
    rows = [r for r in json.loads(dry.out) if r["action"] == "delete"]
    assert [(r["name"], r["zone"], r["kind"]) for r in rows] == [
        ("half", ZONE, "computeLeftovers")]  # fmt: skip
    assert rows[0]["parts"] == [{"kind": "instance template", "name": "half-d-it"},
                                {"kind": "workload policy", "name": "half-d-wp"}]  # fmt: skip
    assert "left without its managed instance group" in rows[0]["reason"]
    assert _paths(emulator) == sorted(left + foreign)  # a dry run deletes nothing

    done = cli("gc", "--yes")
    assert done.code == 0, done.err
    assert "deleted half (us-east1-d, instance template half-d-it and workload policy " \
        "half-d-wp): orphaned: left without its managed instance group" in done.out  # fmt: skip
    assert _paths(emulator) == foreign  # someone else's stay, however they look
    counts = emulator.requests()
    assert (counts.get("DELETE compute.regionInstanceTemplates.delete"),
            counts.get("DELETE compute.resourcePolicies.delete")) == (1, 1)  # fmt: skip

    log = Path(os.environ["XDG_STATE_HOME"]) / "tpuctl" / "gc.log"
    (entry,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert (entry["kind"], entry["node"], entry["result"]) == ("computeLeftovers", "half",
                                                               "deleted")  # fmt: skip
    assert "half-d-it" in entry["reason"] and "orphaned" in entry["reason"]


def test_a_group_whose_vms_are_gone_is_collected_with_its_template_and_policy(
    cli, emulator
) -> None:
    assert cli("create", "empty", *SLICE).code == 0
    for vm in [r["name"] for r in emulator.instances() if "/instances/" in r["name"]]:
        requests.delete(f"http://{emulator.address}/compute/v1/{vm}", timeout=30)
    emulator.advance()
    group = f"{P}/zones/{ZONE}/instanceGroupManagers/empty"
    emulator.compute_age(group, HOUR)
    for path in (f"regions/{REGION}/instanceTemplates/empty-d-it",
                 f"regions/{REGION}/resourcePolicies/empty-d-wp"):  # fmt: skip
        emulator.compute_age(f"{P}/{path}", HOUR)

    dry = cli("gc", "--dry-run")
    assert dry.code == 0, dry.err
    assert ("would delete empty (us-east1-d, managed instance group empty and instance "
            "template empty-d-it and workload policy empty-d-wp): orphaned: its managed "
            "instance group has no VM left") in dry.err  # fmt: skip
    done = cli("gc", "--yes")
    assert done.code == 0, done.err
    assert emulator.instances() == []
    assert "deleted empty (us-east1-d, managed instance group empty" in done.out


def test_expired_and_preempted_compute_vms_are_collected_by_their_labels(cli, emulator) -> None:
    assert cli("create", "old", "-a", "v6e-8", "--api", "compute", "--zone", ZONE,
               "--ttl", "8h").code == 0  # fmt: skip
    assert cli("create", "fresh", "-a", "v6e-8", "--api", "compute", "--zone", ZONE,
               "--ttl", "8h").code == 0  # fmt: skip
    set_label(emulator, "old", "tpuctl-expires", str(int(time.time()) - 120))

    done = cli("gc", "--yes")
    assert done.code == 0, done.err
    assert "deleted old (us-east1-d, v6e-8): expired 2m ago (--ttl)" in done.out
    assert [i["name"].rsplit("/", 1)[-1] for i in emulator.instances()] == ["fresh"]
    assert cli("delete", "fresh", "--zone", ZONE, "--yes").code == 0


def _policy(name: str, description: str) -> dict[str, Any]:
    workload = {"type": "HIGH_THROUGHPUT", "acceleratorTopology": "4x4"}
    return {"name": name, "description": description, "workloadPolicy": workload}


def test_a_policy_left_alone_goes_by_the_owner_its_description_names(cli, emulator) -> None:
    """A create SIGKILLed after its policy, before its template: the policy names its owner,
    so plain gc collects it; another account's stays, and so does one that names no owner
    (an older tpuctl's) until --all-owners."""
    from tpuctl.services.names import owner_label

    emulator.faults(rate=1.0, codes=[503], paths=r"/instanceTemplates(\?|$)")
    with spawned("create", "lone", *SLICE) as p:
        wait_until(lambda: "WORKLOAD_POLICY" in _kinds(emulator), "the policy", 60)
        p.proc.send_signal(signal.SIGKILL)
    emulator.faults()
    assert _kinds(emulator) == ["WORKLOAD_POLICY"]
    policies = f"http://{emulator.address}/compute/v1/{P}/regions/{REGION}/resourcePolicies"
    mine = requests.get(f"{policies}/lone-d-wp", timeout=30).json()["description"]
    assert mine.startswith("tpuctl: workload policy of TPU slice lone in us-east1-d, owned by ")
    theirs = mine.replace("lone", "bob").rsplit("=", 1)[0] + "=" + owner_label("bob@x.com")
    _insert(emulator, f"regions/{REGION}/resourcePolicies", _policy("bob-d-wp", theirs))
    _insert(emulator, f"regions/{REGION}/resourcePolicies", _policy(
        "old-d-wp", "tpuctl: workload policy of TPU slice old in us-east1-d"))  # fmt: skip
    for name in ("lone", "bob", "old"):
        emulator.compute_age(f"{P}/regions/{REGION}/resourcePolicies/{name}-d-wp", HOUR)

    done = cli("gc", "--yes")
    assert done.code == 0, done.err
    assert "deleted lone (us-east1-d, workload policy lone-d-wp): orphaned" in done.out
    assert "keep old (us-east1-d, workload policy old-d-wp): its owner is unknown" in done.err
    assert "bob" not in done.out + done.err  # another account's: none of this gc's business
    assert _paths(emulator) == [f"regions/{REGION}/resourcePolicies/{n}-d-wp"
                                for n in ("bob", "old")]  # fmt: skip

    everyone = cli("gc", "--yes", "--all-owners")
    assert everyone.code == 0, everyone.err
    assert emulator.instances() == []
