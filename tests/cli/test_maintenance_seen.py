"""Host maintenance, seen from the laptop on both APIs: announced (list's STATE, describe's
row, --json's upcomingMaintenance with its window), carried out (the node down for it,
said so), and started early with `tpuctl maintain NODE --now` (Compute Engine's
instances.performMaintenance, the Cloud TPU API's v2alpha1 nodes.performMaintenance);
with nothing pending, one line and exit 2. Phases move with the emulator's `advance`."""

from __future__ import annotations

import json

import pytest

from tests.cli.conftest import one_line_error
from tpuctl.timestamps import parse_rfc3339

PROJECT = "tpuctl-demo"
TPU_ZONE = "us-central1-a"
VM_ZONE = "us-central1-c"
HOUR = 3600.0

# (accelerator, zone, the path the emulator's control plane names it by)
APIS = {
    "tpu": ("v3-8", TPU_ZONE, f"projects/{PROJECT}/locations/{TPU_ZONE}/nodes/"),
    "compute": ("tpu7x-8", VM_ZONE, f"projects/{PROJECT}/zones/{VM_ZONE}/instances/"),
}


def _made(cli, api: str, name: str) -> str:  # noqa: ANN001
    accelerator, zone, path = APIS[api]
    assert cli("create", name, "-a", accelerator, "--zone", zone).code == 0
    return path + name


def _listed(cli, name: str, zone: str) -> str:  # noqa: ANN001
    shown = cli("list", "--zone", zone)
    assert shown.code == 0, shown.err
    return next(line for line in shown.out.splitlines() if line.startswith(name + " "))


@pytest.mark.parametrize("api", list(APIS))
def test_an_announced_maintenance_is_shown_then_the_node_down_for_it(cli, emulator, api) -> None:
    zone = APIS[api][1]
    path = _made(cli, api, "mnt")
    assert "maint" not in _listed(cli, "mnt", zone)
    assert json.loads(cli("describe", "mnt", "--zone", zone, "--json").out)[
        "upcomingMaintenance"
    ] is None  # fmt: skip
    announced = emulator.maintenance(path, notice=HOUR, duration=HOUR)["upcomingMaintenance"]
    start = parse_rfc3339(announced["windowStartTime"])
    end = parse_rfc3339(announced["windowEndTime"])
    assert f"(maint {start:%H:%M})" in _listed(cli, "mnt", zone)
    described = cli("describe", "mnt", "--zone", zone)
    window = f"{start:%Y-%m-%d %H:%M}-{end:%H:%M} UTC"
    assert f"scheduled, {window}, pending, can be rescheduled" in described.out
    assert "tpuctl maintain mnt --now" in described.out
    got = json.loads(cli("describe", "mnt", "--zone", zone, "--json").out)["upcomingMaintenance"]
    assert got["maintenanceStatus"] == "PENDING" and got["type"] == "SCHEDULED"
    assert parse_rfc3339(got["windowStartTime"]) == start and got["canReschedule"] is True
    listed = json.loads(cli("list", "--zone", zone, "--json").out)
    assert [n["upcomingMaintenance"] for n in listed if n.get("name") == "mnt"] == [got]
    topped = {r["name"]: r for r in json.loads(cli("top", "--zone", zone, "--json").out)}
    assert topped["mnt"]["upcomingMaintenance"] == got
    assert "(maint " in cli("top", "--zone", zone).out
    shown = cli("maintain", "mnt", "--zone", zone)
    assert shown.code == 0 and f"scheduled, {window}, pending" in shown.out
    emulator.advance(path)  # the window starts: the guest is shut down
    emulator.advance(path)  # the VM is down for the window
    got = json.loads(cli("describe", "mnt", "--zone", zone, "--json").out)
    assert got["upcomingMaintenance"]["maintenanceStatus"] == "ONGOING"
    end = parse_rfc3339(got["upcomingMaintenance"]["windowEndTime"])  # advance moved it
    down = "REPAIRING" if api == "tpu" else "STOPPED"
    assert f"{down} (maintenance until {end:%H:%M})" in _listed(cli, "mnt", zone)
    emulator.advance(path)  # over: back, and nothing announced
    assert cli("delete", "mnt", "--zone", zone, "--yes").code == 0


@pytest.mark.parametrize("api", list(APIS))
def test_maintain_now_starts_a_pending_maintenance(cli, emulator, api) -> None:
    zone = APIS[api][1]
    path = _made(cli, api, "early")
    emulator.maintenance(path, notice=HOUR, duration=HOUR)
    started = cli("maintain", "early", "--zone", zone, "--now", "--json")
    assert started.code == 0, started.err
    assert json.loads(started.out)["upcomingMaintenance"]["maintenanceStatus"] == "ONGOING"
    assert "started the maintenance of early" in started.err
    emulator.advance(path)  # the guest's shutdown is over: the VM is down
    state = json.loads(cli("describe", "early", "--zone", zone, "--json").out)["state"]
    assert state == ("REPAIRING" if api == "tpu" else "STOPPED")
    again = cli("maintain", "early", "--zone", zone, "--now")
    assert again.code == 2
    assert "the maintenance of early has already started" in one_line_error(again)
    emulator.advance(path)
    assert cli("delete", "early", "--zone", zone, "--yes").code == 0


@pytest.mark.parametrize("api", list(APIS))
def test_maintain_with_nothing_announced(cli, emulator, api) -> None:
    zone = APIS[api][1]
    _made(cli, api, "calm")
    shown = cli("maintain", "calm", "--zone", zone)
    assert shown.code == 0 and shown.out.strip() == "no maintenance announced for calm"
    refused = cli("maintain", "calm", "--zone", zone, "--now")
    assert refused.code == 2
    assert "no maintenance announced for calm" in one_line_error(refused)
    assert cli("delete", "calm", "--zone", zone, "--yes").code == 0
