"""`tpuctl emulator maintenance NODE`: a host maintenance announced on a node of either
API, as a user (and the run tests) would ask for one."""

from __future__ import annotations


def test_a_maintenance_is_announced_on_either_api(cli, emulator) -> None:
    assert cli("create", "tm", "-a", "v5litepod-1", "--zone", "us-central1-a").code == 0
    r = cli("emulator", "maintenance", "tm", "--zone", "us-central1-a", "--notice", "1h")
    assert r.code == 0, r.err
    assert "maintenance of tm in us-central1-a: PENDING, window " in r.err
    (node,) = emulator.nodes()
    assert node["upcomingMaintenance"]["maintenanceStatus"] == "PENDING"
    again = cli("emulator", "maintenance", "tm", "--zone", "us-central1-a")
    assert again.code == 1 and "already has a maintenance" in again.err
    none = cli("emulator", "maintenance", "nope", "--zone", "us-central1-a")
    assert none.code == 1 and "no node nope in us-central1-a" in none.err, none.err
    bad = cli("emulator", "maintenance", "tm", "--zone", "us-central1-a", "--notice", "x")
    assert bad.code == 2 and "--notice" in bad.err
    assert cli("delete", "tm", "--zone", "us-central1-a", "--yes").code == 0
    r = cli("create", "cm", "-a", "v6e-1", "--api", "compute", "--zone", "us-east1-d")
    assert r.code == 0, r.err
    r = cli(
        "emulator", "maintenance", "cm", "--zone", "us-east1-d", "--notice", "0", "--duration", "1h"
    )
    assert r.code == 0 and "cm in us-east1-d: ONGOING" in r.err, r.err
    (vm,) = [i for i in emulator.instances() if "/instances/" in i["name"]]
    emulator.advance(vm["name"])  # the guest's shutdown is over: the VM is down
    assert [i["status"] for i in emulator.instances() if i["name"] == vm["name"]] == ["TERMINATED"]
    assert cli("delete", "cm", "--zone", "us-east1-d", "--yes").code == 0
