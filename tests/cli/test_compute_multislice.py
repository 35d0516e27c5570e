"""Multislice on Compute Engine: `create NAME --slices N --api compute` makes N slices
(`NAME-0` ...) as one unit in one zone, all or nothing; `list` shows them as one
multislice request with its slices; `delete NAME` removes every slice and `delete NAME-1`
alone is refused. `run --slices` is in tests/cli/test_run_compute_multislice.py."""

from __future__ import annotations

import json
import time

import pytest

from tests.cli.conftest import one_line_error
from tests.cli.test_gc_compute import set_label
from tpuctl.cloud.compute import KIND
from tpuctl.startup import Startup

ZONE = "us-east1-d"  # v6e here
SLICES = ("-a", "v6e-16", "--api", "compute", "--zone", ZONE, "--slices", "2")


def _groups(emulator) -> list[str]:  # noqa: ANN001
    return sorted(
        r["name"].rsplit("/", 1)[-1]
        for r in emulator.instances()
        if r["status"] == "INSTANCE_GROUP_MANAGER"
    )


def test_two_v6e_slices_are_made_listed_and_deleted_as_one(cli, emulator) -> None:
    made = cli("create", "ms", *SLICES, "--json")
    assert made.code == 0, made.err
    shown = json.loads(made.out)
    assert [s["name"] for s in shown["slices"]] == ["ms-0", "ms-1"]
    assert {(s["api"], s["state"], len(s["workers"])) for s in shown["slices"]} == {
        ("compute", "READY", 4)
    }
    assert _groups(emulator) == ["ms-0", "ms-1"]
    # each slice its own workload policy (its own interconnect), in the one zone
    policies = [b["body"]["name"] for b in emulator.bodies("compute.resourcePolicies.insert")]
    assert sorted(policies) == ["ms-0-d-wp", "ms-1-d-wp"]

    listed = json.loads(cli("list", "--zone", ZONE, "--json").out)
    (request,) = [e for e in listed if e["kind"] == "queuedResource"]
    assert (request["name"], request["state"], request["nodes"], request["api"]) == (
        "ms", "ACTIVE", ["ms-0", "ms-1"], "compute")  # fmt: skip
    slices = [e for e in listed if e["kind"] == "node"]
    assert {s["queuedResource"] for s in slices} == {
        f"projects/tpuctl-demo/locations/{ZONE}/queuedResources/ms"
    }
    table = cli("list", "--zone", ZONE).out
    assert "ms-0" in table and "ms-1" in table and "ACTIVE" in table

    alone = cli("delete", "ms-1", "--zone", ZONE, "--yes")
    assert alone.code == 2
    assert "ms-1 is slice 1 of the multislice ms (ms-0, ms-1)" in (one_line_error(alone))
    assert _groups(emulator) == ["ms-0", "ms-1"]

    gone = cli("delete", "ms", "--zone", ZONE, "--yes")
    assert gone.code == 0, gone.err
    assert "ms: multislice deleted with its nodes ms-0, ms-1" in gone.out
    assert "queued resource" not in alone.err + gone.out + gone.err + table  # it has none
    assert emulator.instances() == []


def test_two_tpu7x_8_slices_are_two_vms(cli, emulator) -> None:
    zone = "us-central1-c"  # TPU7x here
    made = cli("create", "iron", "-a", "tpu7x-8", "--zone", zone, "--slices", "2")
    assert made.code == 0, made.err
    names = sorted(r["name"].rsplit("/", 1)[-1] for r in emulator.instances())
    assert names == ["iron-0", "iron-1"]
    assert cli("delete", "iron", "--zone", zone, "--yes").code == 0
    assert emulator.instances() == []


def test_room_for_one_slice_only_leaves_nothing_and_says_why(cli, emulator) -> None:
    emulator.capacity({ZONE: {"v6e": 16}})  # one v6e-16, not two
    r = cli("create", "big", *SLICES)
    assert r.code == 5, r.err  # no capacity, as for one slice
    assert "slice 1 of 2 (big-1)" in r.err and "does not have enough resources" in r.err, r.err
    assert "big ended FAILED: no capacity for slice 1 of 2" in r.err
    assert "tpuctl deleted what it had made" in r.err
    assert emulator.instances() == []


def test_room_for_one_single_host_slice_only_leaves_nothing(cli, emulator) -> None:
    zone = "us-central1-c"
    emulator.capacity({zone: {"tpu7x": 4}})  # one tpu7x-8 (4 chips), not two
    r = cli("create", "big", "-a", "tpu7x-8", "--zone", zone, "--slices", "2")
    assert r.code == 5, r.err
    assert "slice 1 of 2 (big-1)" in r.err and "deleted what was made of big (big-0" in r.err
    assert emulator.instances() == []


@pytest.mark.parametrize("flag", [["--valid-until", "1h"], ["--valid-until-time", "2030-01-01"]])
def test_a_compute_multislice_waits_only_with_flex_start(cli, emulator, flag) -> None:
    r = cli("create", "no", *SLICES, *flag)
    assert r.code == 2, r.err
    assert f"{flag[0]} goes with --slices on Compute Engine only with --flex-start" in (
        one_line_error(r)
    )
    assert emulator.instances() == []


def test_a_spot_multislice_is_spot_vms_on_every_slice(cli, emulator) -> None:
    made = cli("create", "cheap", "-a", "v6e-8", "--api", "compute", "--zone", ZONE,
               "--slices", "2", "--spot", "--json")  # fmt: skip
    assert made.code == 0, made.err
    assert [s["name"] for s in json.loads(made.out)["slices"]] == ["cheap-0", "cheap-1"]
    bodies = [b["body"]["scheduling"] for b in emulator.bodies("compute.instances.insert")]
    assert [b["provisioningModel"] for b in bodies] == ["SPOT", "SPOT"]
    assert {b["instanceTerminationAction"] for b in bodies} == {"DELETE"}
    listed = json.loads(cli("list", "--zone", ZONE, "--json").out)
    (request,) = [e for e in listed if e["kind"] == "queuedResource"]
    assert request["scheduling"] == "spot"  # the request, as its slices are
    assert cli("delete", "cheap", "--zone", ZONE, "--yes").code == 0
    assert emulator.instances() == []


def test_gc_collects_an_expired_multislice_whole(cli, emulator) -> None:
    assert cli("create", "ms", "-a", "v6e-8", "--api", "compute", "--zone", ZONE,
               "--slices", "2", "--ttl", "8h").code == 0  # fmt: skip
    set_label(emulator, "ms-0", "tpuctl-expires", str(int(time.time()) - 120))  # slice 0 only
    done = cli("gc", "--yes")
    assert done.code == 0, done.err
    assert "deleted ms-0 (us-east1-d, v6e-8): expired 2m ago (--ttl)" in done.out
    assert emulator.instances() == []  # slice 1 went with it: a multislice goes whole


def test_each_slice_boots_the_startup_script_written_for_it(cli, emulator) -> None:
    """Each slice's guard and watchdog are told the slice they run on, not the request
    (which is no VM): its script is the one `Startup` writes for that slice's name."""
    zone = "us-central1-c"  # TPU7x here: each slice one VM
    made = cli("create", "kept", "-a", "tpu7x-8", "--zone", zone, "--slices", "2",
               "--idle-timeout", "1h")  # fmt: skip
    assert made.code == 0, made.err
    scripts = {
        b["body"]["name"]: {i["key"]: i["value"] for i in b["body"]["metadata"]["items"]}
        for b in emulator.bodies("compute.instances.insert")
    }
    assert sorted(scripts) == ["kept-0", "kept-1"]
    for name, metadata in scripts.items():
        wanted = Startup(idle_action="delete").script(KIND.agent_target(name))
        assert metadata["startup-script"] == wanted, name
    assert cli("delete", "kept", "--zone", zone, "--yes").code == 0
