"""`tpuctl run --slices N --flex-start` on Compute Engine: the job runs once every slice
has capacity, and nothing is left after; a client killed while a slice waits leaves no VM
billing for long: each granted slice's boot guard deletes it once the client's lease is
not renewed, a slice granted later too."""

from __future__ import annotations

import pytest

from tests.cli.conftest import spawned
from tests.cli.test_run import project, wait_for
from tests.cli.test_run_compute import _kinds
from tests.cli.test_run_lease import _renewals

__all__ = ["project"]  # the fixture, shared

ZONE = "us-east1-d"  # v6e here
FLEX = ("-a", "v6e-16", "--api", "compute", "--zone", ZONE, "--slices", "2",
        "--flex-start", "--max-run-duration", "1h", "--no-outputs")  # fmt: skip
ONE_SLICE = {ZONE: {"v6e": 16}}  # room for one v6e-16, not two


def _vms(emulator, group: str) -> list[str]:  # noqa: ANN001
    """The statuses of the VMs of the slice `group` (its name ends `-0`, `-1`)."""
    return [
        r["status"]
        for r in emulator.instances()
        if "/instances/" in r["name"] and r["name"].rsplit("/", 1)[-1].rsplit("-", 1)[0] == group
    ]


def _slice_names(emulator) -> list[str]:  # noqa: ANN001
    return sorted(
        r["name"].rsplit("/", 1)[-1]
        for r in emulator.instances()
        if r["status"] == "INSTANCE_GROUP_MANAGER"
    )


@pytest.mark.long
def test_the_job_runs_once_every_slice_has_capacity(cli, emulator, project) -> None:
    """Slice 0 granted first waits for slice 1 with its boot guard armed: the living
    client's lease keeps it past the start deadline, however long slice 1 takes."""
    emulator.capacity(ONE_SLICE)
    guard = ("--start-lease", "2s", "--start-deadline", "3s")
    with spawned("run", str(project / "job.py"), *FLEX, *guard, timeout=120) as p:
        p.wait_for("waiting for capacity; slice 0 (")  # slice 0 has it, slice 1 waits
        first, _second = _slice_names(emulator)
        seen = _renewals(emulator)
        # nine renewals (one every 2/3 s) outlast the deadline and the lease together
        wait_for(lambda: _renewals(emulator) >= seen + 9 or p.proc.poll() is not None, 60)
        assert p.proc.poll() is None, p.err
        assert first in _slice_names(emulator) and set(_vms(emulator, first)) == {"RUNNING"}
        assert "] worker " not in p.err  # nothing runs on half a multislice
        emulator.capacity({ZONE: {"v6e": None}})
    assert p.proc.returncode == 0, p.err
    assert "[s1/w3] worker 3 of 4 job" in p.out, p.out
    assert emulator.instances() == []


@pytest.mark.long
def test_a_killed_client_leaves_no_granted_slice_billing(cli, emulator, project) -> None:
    """SIGKILL while slice 1 waits: slice 0's boot guard deletes its group (its VMs)
    once the lease is stale; the capacity it frees goes to slice 1, which, granted with
    no client, does the same. Templates and policies (they bill nothing) are left for
    `tpuctl delete`, as for one slice."""
    emulator.capacity(ONE_SLICE)
    with spawned("run", str(project / "job.py"), *FLEX, "--start-lease", "2s") as p:
        p.wait_for("waiting for capacity; slice 0 (")
        first, second = _slice_names(emulator)
        assert set(_vms(emulator, second)) == {"PENDING"}  # waiting: it bills nothing
        p.proc.kill()  # no cleanup of any kind on this side
    wait_for(lambda: _slice_names(emulator) == [second], 90)  # slice 0's guard: its group
    wait_for(lambda: _slice_names(emulator) == [] and _vms(emulator, second) == [], 90)
    assert _kinds(emulator) == ["policy"] * 2 + ["template"] * 2
    r = cli("delete", first, second, "--zone", ZONE, "--yes")
    assert r.code == 0, r.err
    assert emulator.instances() == []


def test_a_zone_whose_wait_ends_is_left_for_the_next_zone(cli, emulator, project) -> None:
    """--zone a,b with --valid-until: zone a has room for one slice, not two, so its wait
    ends for no capacity; tpuctl deletes what it had there (the slice granted too) and
    makes the whole multislice in zone b, where the job runs."""
    first, second = "us-east5-a", "us-east5-b"  # v6e in both
    emulator.capacity({first: {"v6e": 16}})
    flags = [f if f != ZONE else f"{first},{second}" for f in FLEX]
    r = cli("run", str(project / "job.py"), *flags, "--valid-until", "4s")
    assert r.code == 0, r.err
    assert f"zone {first} skipped: " in r.err
    assert "no capacity for slice 1 of 2 " in r.err and "wait ended (--valid-until 4s)" in r.err
    assert f"is in {second}" in r.err
    assert "[s1/w3] worker 3 of 4 job" in r.out, r.out
    assert emulator.instances() == []
