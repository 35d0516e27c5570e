"""Flex-start on Compute Engine: `create --flex-start --max-run-duration D` makes a
flex-start VM (or a slice's group in bulk mode) that waits for capacity as PENDING,
shown as waiting; capacity begins it; the end of its wait fails it as Compute does; an
interrupt or a timeout deletes what the create made. Reservations: `--reserved` and
`--reservation NAME` reach `reservationAffinity`."""

from __future__ import annotations

import json
import signal

import pytest

from tests.cli.conftest import Result, one_line_error, spawned

ZONE = "us-central1-c"  # TPU7x
FLEX = ("-a", "tpu7x-8", "--zone", ZONE, "--flex-start", "--max-run-duration", "4h")
SLICE_ZONE = "us-east1-d"  # v6e
FLEX_SLICE = ("-a", "v6e-16", "--api", "compute", "--zone", SLICE_ZONE, "--flex-start",
              "--max-run-duration", "4h")  # fmt: skip


def test_a_flex_start_vm_is_asked_as_gcloud_asks_one(cli, emulator) -> None:
    r = cli("create", "flex", *FLEX, "--valid-until", "30m")
    assert r.code == 0, r.err
    (sent,) = emulator.bodies("compute.instances.insert")
    body = sent["body"]
    assert body["scheduling"]["provisioningModel"] == "FLEX_START"
    assert body["scheduling"]["maxRunDuration"] == {"seconds": str(4 * 3600)}
    assert body["scheduling"]["instanceTerminationAction"] == "DELETE"
    assert body["params"] == {"requestValidForDuration": {"seconds": "1800"}}
    shown = json.loads(cli("describe", "flex", "--zone", ZONE, "--json").out)
    assert shown["raw"]["resourceStatus"]["scheduling"]["terminationTimestamp"]  # 4 h on
    assert cli("delete", "flex", "--zone", ZONE, "--yes").code == 0
    # without --valid-until: the longest wait Compute Engine takes, 2 h
    assert cli("create", "flex2", *FLEX, "--no-wait").code == 0
    sent = emulator.bodies("compute.instances.insert")[-1]["body"]
    assert sent["params"] == {"requestValidForDuration": {"seconds": "7200"}}
    assert cli("delete", "flex2", "--zone", ZONE, "--yes").code == 0


def test_a_flex_start_vm_waits_for_capacity_shown_as_waiting(cli, emulator) -> None:
    emulator.capacity({ZONE: {"tpu7x": 0}})
    r = cli("create", "wait", *FLEX, "--no-wait")
    assert r.code == 0, r.err
    (instance,) = emulator.instances()
    assert instance["status"] == "PENDING"
    listed = cli("list", "--zone", ZONE)
    assert listed.out.split("\n")[1].split()[:5] == [
        "wait", ZONE, "tpu7x-8", "compute", "WAITING_FOR_RESOURCES"
    ], listed.out  # fmt: skip
    shown = cli("describe", "wait", "--zone", ZONE)
    assert "WAITING_FOR_RESOURCES" in shown.out
    assert "flex-start" in next(ln for ln in shown.out.splitlines() if "scheduling" in ln)
    assert "flex-start: waiting for capacity" in shown.out, shown.out
    emulator.capacity({ZONE: {"tpu7x": None}})  # capacity frees: its create goes on
    done = cli("create", "other", "-a", "tpu7x-8", "--zone", ZONE)  # any call ticks
    assert done.code == 0, done.err
    assert {i["status"] for i in emulator.instances()} == {"RUNNING"}
    assert cli("delete", "wait", "other", "--zone", ZONE, "--yes").code == 0


def test_a_waiting_create_that_gets_capacity_ends_ready(cli, emulator) -> None:
    emulator.capacity({ZONE: {"tpu7x": 0}})
    with spawned("create", "late", *FLEX) as p:
        p.wait_for("WAITING_FOR_RESOURCES")
        (instance,) = emulator.instances()
        assert emulator.advance(instance["name"]) == [instance["name"]]  # capacity, now
    assert p.proc.returncode == 0, p.err
    assert "waiting for capacity" in p.err
    assert [i["status"] for i in emulator.instances()] == ["RUNNING"]
    assert cli("delete", "late", "--zone", ZONE, "--yes").code == 0


def test_the_end_of_the_wait_fails_the_insert_as_compute_engine_does(emulator) -> None:
    """A flex-start insert whose requestValidForDuration passes with no capacity: its
    operation fails as a stockout, and the VM is gone."""
    emulator.capacity({ZONE: {"tpu7x": 0}})
    base = f"http://{emulator.address}/compute/v1/projects/tpuctl-demo/zones/{ZONE}"
    body = {
        "name": "brief",
        "machineType": f"zones/{ZONE}/machineTypes/tpu7x-standard-4t",
        "scheduling": {"onHostMaintenance": "TERMINATE", "provisioningModel": "FLEX_START",
                       "maxRunDuration": {"seconds": "3600"}},
        "params": {"requestValidForDuration": {"seconds": "0"}},
    }  # fmt: skip
    op = _call("POST", f"{base}/instances", body)
    assert op["status"] == "RUNNING"  # waiting
    done = _call("GET", f"{base}/operations/{op['name']}")
    assert done["status"] == "DONE"
    assert done["error"]["errors"][0]["code"] == "ZONE_RESOURCE_POOL_EXHAUSTED"
    assert emulator.instances() == []


def _call(method: str, url: str, body: dict | None = None) -> dict:
    import urllib.request

    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(request, timeout=10) as answer:
        return dict(json.loads(answer.read()))


def signalled_while_waiting(sig: int, *args: str) -> Result:
    """`tpuctl ARGS...` sent `sig` once it waits for capacity (the emulator has none);
    its exit code and stderr."""
    with spawned(*args) as p:
        p.wait_for("WAITING_FOR_RESOURCES")
        p.proc.send_signal(sig)
    return Result(p.proc.returncode, "", p.err)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_waiting_deletes_the_flex_start_vm(cli, emulator, sig) -> None:
    emulator.capacity({ZONE: {"tpu7x": 0}})
    r = signalled_while_waiting(sig, "create", "gone", *FLEX)
    assert r.code == 130, r.err
    assert one_line_error(r, after_call=True) == (
        "error: interrupted; deleted what the create of gone had made"
    )
    assert f"deleted gone in {ZONE} (its VM)" in r.err
    assert emulator.instances() == []


def test_a_timeout_deletes_the_waiting_vm_and_keep_request_keeps_it(cli, emulator) -> None:
    emulator.capacity({ZONE: {"tpu7x": 0}})
    r = cli("create", "slow", *FLEX, "--timeout", "1s")
    assert r.code != 0 and "timed out" in r.err, r.err
    assert emulator.instances() == []
    r = cli("create", "kept", *FLEX, "--timeout", "1s", "--keep-request")
    assert r.code != 0
    assert [i["status"] for i in emulator.instances()] == ["PENDING"]
    assert cli("delete", "kept", "--zone", ZONE, "--yes").code == 0
    assert emulator.instances() == []


def test_a_flex_start_slice_waits_in_bulk_and_comes_up_whole(cli, emulator) -> None:
    emulator.capacity({SLICE_ZONE: {"v6e": 8}})  # room for half of it
    with spawned("create", "bulk", *FLEX_SLICE) as p:
        p.wait_for("WAITING_FOR_RESOURCES")
        assert {i["status"] for i in emulator.instances() if "/instances/" in i["name"]} == {
            "PENDING"
        }  # none began: all together or none
        shown = cli("describe", "bulk", "--zone", SLICE_ZONE)
        assert "WAITING_FOR_RESOURCES" in shown.out
        assert "4 of 4 VMs waiting for capacity" in shown.out, shown.out
        emulator.capacity({SLICE_ZONE: {"v6e": None}})
    assert p.proc.returncode == 0, p.err
    group = emulator.bodies("compute.instanceGroupManagers.insert")[-1]["body"]
    assert group["targetSizePolicy"] == {"mode": "BULK"}
    template = emulator.bodies("compute.regionInstanceTemplates.insert")[-1]["body"]
    scheduling = template["properties"]["scheduling"]
    assert (scheduling["provisioningModel"], scheduling["instanceTerminationAction"]) == (
        "FLEX_START", "DELETE"
    )  # fmt: skip
    assert "params" not in template["properties"]  # an insert's own
    assert cli("delete", "bulk", "--zone", SLICE_ZONE, "--yes").code == 0
    assert emulator.instances() == []


def test_flex_start_flags_are_checked_before_any_call(cli, emulator) -> None:
    for flags, said in (
        ((), "--flex-start needs --max-run-duration"),
        (("--max-run-duration", "8d"), "at most 7d"),
        (("--max-run-duration", "1h", "--spot"), "--flex-start and --spot are exclusive"),
        (("--max-run-duration", "1h", "--valid-until", "3h"), "from 90s to 2h"),
        (("--max-run-duration", "1h", "--reservation", "r"), "exclusive"),
    ):
        r = cli("create", "x", "-a", "tpu7x-8", "--zone", ZONE, "--flex-start", *flags)
        assert r.code == 2, r.err
        assert said in one_line_error(r)
    assert emulator.instances() == []


# -- reservations -----------------------------------------------------------------------
def test_a_specific_reservation_is_consumed_and_an_unknown_one_refused(cli, emulator) -> None:
    r = cli("create", "nores", "-a", "tpu7x-8", "--zone", ZONE, "--reservation", "mine")
    assert r.code != 0
    assert "Could not find the given reservation with the following name: mine" in r.err
    assert emulator.instances() == []

    emulator.reservation(ZONE, "mine", "tpu7x-standard-4t", count=1, specific=True)
    emulator.capacity({ZONE: {"tpu7x": 0}})  # the reservation's capacity is its own
    r = cli("create", "res", "-a", "tpu7x-8", "--zone", ZONE, "--reservation", "mine")
    assert r.code == 0, r.err
    sent = emulator.bodies("compute.instances.insert")[-1]["body"]
    assert sent["reservationAffinity"] == {
        "consumeReservationType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": ["mine"],
    }
    full = cli("create", "res2", "-a", "tpu7x-8", "--zone", ZONE, "--reservation", "mine")
    assert full.code != 0 and "no unused capacity" in full.err, full.err
    assert cli("delete", "res", "--zone", ZONE, "--yes").code == 0
    assert emulator.instances() == []


def test_reserved_asks_for_any_reservation(cli, emulator) -> None:
    emulator.reservation(ZONE, "pool", "tpu7x-standard-4t", count=1)
    emulator.capacity({ZONE: {"tpu7x": 0}})
    r = cli("create", "any", "-a", "tpu7x-8", "--zone", ZONE, "--reserved")
    assert r.code == 0, r.err
    sent = emulator.bodies("compute.instances.insert")[-1]["body"]
    assert sent["reservationAffinity"] == {"consumeReservationType": "ANY_RESERVATION"}
    assert cli("delete", "any", "--zone", ZONE, "--yes").code == 0


def test_reservation_is_compute_engines_and_not_for_spot(cli, emulator) -> None:
    r = cli("create", "x", "-a", "v3-8", "--zone", "us-central1-a", "--reservation", "r")
    assert r.code == 2 and "--reservation NAME is Compute Engine's" in one_line_error(r)
    r = cli("create", "x", "-a", "tpu7x-8", "--zone", ZONE, "--spot", "--reservation", "r")
    assert r.code == 2 and "cannot consume a reservation" in one_line_error(r)
    assert emulator.instances() == []


def test_flex_start_counts_against_the_preemptible_quota(cli, emulator) -> None:
    """A new project has no on-demand TPU quota on Compute Engine but preemptible v6e
    quota: a flex-start VM takes the preemptible one, as spot does."""
    emulator.config(quotas="new-project")
    r = cli("create", "q", "-a", "v6e-8", "--api", "compute", "--zone", "us-east1-d",
            "--flex-start", "--max-run-duration", "1h")  # fmt: skip
    assert r.code == 0, r.err
    assert cli("delete", "q", "--zone", "us-east1-d", "--yes").code == 0


def test_a_waiting_vm_being_deleted_is_not_begun_by_new_capacity(cli, emulator) -> None:
    emulator.capacity({ZONE: {"tpu7x": 0}})
    assert cli("create", "del", *FLEX, "--no-wait").code == 0
    emulator.config(durations={"delete": None})  # the delete stays under way
    assert cli("delete", "del", "--zone", ZONE, "--yes", "--no-wait").code == 0
    emulator.capacity({ZONE: {"tpu7x": None}})
    assert [i["status"] for i in emulator.instances()] == ["STOPPING"]  # not PROVISIONING
    emulator.advance()
    assert emulator.instances() == []


def test_a_flex_start_slice_whose_wait_ends_fails_for_no_capacity_and_leaves_nothing(
    cli, emulator
) -> None:
    """A group has no deadline of its own: --valid-until is tpuctl's, counted from the
    group's creation, and its end is no capacity (exit 5), as a single VM's own wait's is."""
    emulator.capacity({SLICE_ZONE: {"v6e": 0}})
    r = cli("create", "brief", *FLEX_SLICE, "--valid-until", "2s")
    assert r.code == 5, r.err
    assert "no capacity for brief before its wait ended (--valid-until 2s)" in r.err, r.err
    assert f"deleted brief in {SLICE_ZONE}" in r.err
    assert emulator.instances() == []


def test_a_flex_start_slice_that_times_out_leaves_nothing(cli, emulator) -> None:
    emulator.capacity({SLICE_ZONE: {"v6e": 0}})
    r = cli("create", "late", *FLEX_SLICE, "--timeout", "1s")
    assert r.code != 0 and "timed out" in r.err, r.err
    assert f"deleted late in {SLICE_ZONE} (its VMs, instance template and workload policy)" in r.err
    assert emulator.instances() == []
