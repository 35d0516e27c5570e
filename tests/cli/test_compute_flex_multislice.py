"""Flex-start for a multislice on Compute Engine: `create NAME --slices N --flex-start
--max-run-duration D` asks for every slice at once (each group in bulk mode), so all wait
for capacity together; the create ends once every slice has all its VMs, and lists them
as one multislice. A wait that ends first (--timeout, a signal) deletes every slice and
names the slices that had no capacity. `run` is in test_run_compute_flex_multislice.py."""

from __future__ import annotations

import json
import signal

import pytest

from tests.cli.conftest import one_line_error, spawned
from tests.cli.test_compute_flex import signalled_while_waiting

ZONE = "us-east1-d"  # v6e here
FLEX = ("-a", "v6e-16", "--api", "compute", "--zone", ZONE, "--slices", "2",
        "--flex-start", "--max-run-duration", "4h")  # fmt: skip
ONE_SLICE = {ZONE: {"v6e": 16}}  # room for one v6e-16 (16 chips), not two


def _groups(emulator) -> dict[str, list[str]]:  # noqa: ANN001
    """Each group's VMs' statuses, by the group's name."""
    out: dict[str, list[str]] = {}
    for r in emulator.instances():
        name = r["name"].rsplit("/", 1)[-1]
        if r["status"] == "INSTANCE_GROUP_MANAGER":
            out.setdefault(name, [])
        elif "/instances/" in r["name"]:
            out.setdefault(name.rsplit("-", 1)[0], []).append(r["status"])
    return out


def test_every_slice_is_asked_for_at_once_and_granted_together(cli, emulator) -> None:
    emulator.capacity({ZONE: {"v6e": 0}})
    with spawned("create", "fx", *FLEX, "--json") as p:
        p.wait_for("WAITING_FOR_RESOURCES")
        # both groups were inserted before any capacity: they wait side by side
        groups = emulator.bodies("compute.instanceGroupManagers.insert")
        assert [g["body"]["name"] for g in groups] == ["fx-0", "fx-1"]
        assert {json.dumps(g["body"]["targetSizePolicy"]) for g in groups} == {'{"mode": "BULK"}'}
        listed = json.loads(cli("list", "--zone", ZONE, "--json").out)
        (request,) = [e for e in listed if e["kind"] == "queuedResource"]
        assert (request["state"], request["scheduling"]) == ("WAITING_FOR_RESOURCES", "flex-start")
        assert request["progress"] == "slices 0, 1 of 2 (fx-0, fx-1) waiting for capacity"
        emulator.capacity(ONE_SLICE)  # slice 0 has its VMs; slice 1 still waits
        p.wait_for("slice 1 of 2 (fx-1) waiting for capacity; slice 0 (fx-0) granted")
        assert sorted(_groups(emulator)["fx-0"]) != ["PENDING"] * 4
        assert _groups(emulator)["fx-1"] == ["PENDING"] * 4
        emulator.capacity({ZONE: {"v6e": None}})
    assert p.proc.returncode == 0, p.err
    shown = json.loads(p.out)
    assert [(s["name"], s["state"], s["scheduling"]) for s in shown["slices"]] == [
        ("fx-0", "READY", "flex-start"), ("fx-1", "READY", "flex-start")
    ]  # fmt: skip
    listed = json.loads(cli("list", "--zone", ZONE, "--json").out)
    (request,) = [e for e in listed if e["kind"] == "queuedResource"]
    assert (request["name"], request["state"], request["nodes"], request["progress"]) == (
        "fx", "ACTIVE", ["fx-0", "fx-1"], None)  # fmt: skip
    assert cli("delete", "fx", "--zone", ZONE, "--yes").code == 0
    assert emulator.instances() == []


def test_single_host_slices_are_flex_start_vms_waiting_side_by_side(cli, emulator) -> None:
    zone = "us-central1-c"  # TPU7x here
    emulator.capacity({zone: {"tpu7x": 4}})  # one tpu7x-8 (4 chips), not two
    flags = ("--flex-start", "--max-run-duration", "1h", "--valid-until", "30m")
    with spawned("create", "vm", "-a", "tpu7x-8", "--zone", zone, "--slices", "2", *flags) as p:
        p.wait_for("slice 1 of 2 (vm-1) waiting for capacity; slice 0 (vm-0) granted")
        sent = [b["body"] for b in emulator.bodies("compute.instances.insert")]
        assert [(b["name"], b["scheduling"]["provisioningModel"]) for b in sent] == [
            ("vm-0", "FLEX_START"), ("vm-1", "FLEX_START")
        ]  # fmt: skip
        assert {json.dumps(b["params"]) for b in sent} == {
            '{"requestValidForDuration": {"seconds": "1800"}}'
        }
        emulator.capacity({zone: {"tpu7x": None}})
    assert p.proc.returncode == 0, p.err
    assert sorted(i["status"] for i in emulator.instances()) == ["RUNNING", "RUNNING"]
    assert cli("delete", "vm", "--zone", zone, "--yes").code == 0
    assert emulator.instances() == []


def test_a_slice_never_granted_within_the_timeout_leaves_nothing(cli, emulator) -> None:
    emulator.capacity(ONE_SLICE)
    r = cli("create", "half", *FLEX, "--timeout", "3s")
    assert r.code == 6, r.err
    assert one_line_error(r, after_call=True) == (
        "error: gave up after 3s (slice 1 of 2 (half-1) waiting for capacity; slice 0 "
        "(half-0) granted); deleted multislice half (and any node it had made), so nothing "
        "is left billing"
    )
    assert emulator.instances() == []  # no VM, group, template or policy of either slice


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_waiting_deletes_every_slice(cli, emulator, sig) -> None:
    emulator.capacity({ZONE: {"v6e": 0}})
    r = signalled_while_waiting(sig, "create", "stop", *FLEX)
    assert r.code == 130, r.err
    said = one_line_error(r, after_call=True)
    assert said.startswith("error: stopped waiting (slices 0, 1 of 2 (stop-0, stop-1) waiting")
    assert "deleted multislice stop" in said
    assert emulator.instances() == []


def test_slices_a_killed_create_left_waiting_are_listed_and_cancelled_whole(cli, emulator) -> None:
    emulator.capacity({ZONE: {"v6e": 0}})
    with spawned("create", "left", *FLEX) as p:
        p.wait_for("WAITING_FOR_RESOURCES")
        p.proc.kill()  # no cleanup of any kind on this side
    listed = json.loads(cli("list", "--zone", ZONE, "--json").out)
    (request,) = [e for e in listed if e["kind"] == "queuedResource"]
    assert (request["name"], request["state"]) == ("left", "WAITING_FOR_RESOURCES")
    r = cli("delete", "left", "--zone", ZONE, "--yes")
    assert r.code == 0, r.err
    assert emulator.instances() == []


def test_flex_start_multislice_flags_are_checked_before_any_call(cli, emulator) -> None:
    for flags, said in (
        (FLEX[:-2], "--flex-start needs --max-run-duration"),
        ((*FLEX, "--spot"), "--flex-start and --spot are exclusive"),
    ):
        r = cli("create", "x", *flags)
        assert r.code == 2, r.err
        assert said in one_line_error(r) + r.err
    assert emulator.instances() == []
