"""Single-host TPU VMs on Compute Engine with the same commands: create, describe, list's
JSON, delete; the Cloud TPU API's and Compute Engine's types each where they are offered."""

from __future__ import annotations

import json

from tests.cli.conftest import one_line_error

ZONE = "us-central1-c"  # where the emulated Compute Engine offers TPU7x


def test_a_tpu7x_vm_goes_to_compute_engine_and_back(cli, emulator) -> None:
    r = cli("create", "iron", "-a", "tpu7x-8", "--zone", ZONE, "--json")
    assert r.code == 0, r.err
    made = json.loads(r.out)
    assert (made["api"], made["acceleratorType"], made["state"]) == ("compute", "tpu7x-8", "READY")
    assert len(made["workers"]) == 1 and made["workers"][0]["internalIp"].startswith("127.")
    assert made["managed"] is True and made["owner"]
    (instance,) = emulator.instances()
    assert instance["machineType"] == "tpu7x-standard-4t"
    assert emulator.nodes() == []  # nothing on the Cloud TPU API

    shown = json.loads(cli("describe", "iron", "--zone", ZONE, "--json").out)
    assert (shown["api"], shown["name"]) == ("compute", "iron")
    assert shown["raw"]["scheduling"]["onHostMaintenance"] == "TERMINATE"  # cannot migrate

    assert cli("create", "old", "-a", "v3-8", "--zone", "us-central1-a").code == 0
    listed = cli("list", "--all-zones")
    header, *rows = listed.out.strip().splitlines()
    assert header.split()[:5] == ["NAME", "ZONE", "ACCELERATOR", "API", "STATE"]
    assert sorted(row.split()[:5] for row in rows) == [
        ["iron", ZONE, "tpu7x-8", "compute", "READY"],
        ["old", "us-central1-a", "v3-8", "tpu", "READY"],
    ]
    data = json.loads(cli("list", "--all-zones", "--json").out)
    assert sorted((d["name"], d.get("api")) for d in data) == [("iron", "compute"), ("old", "tpu")]
    assert cli("delete", "old", "--zone", "us-central1-a", "--yes").code == 0

    gone = cli("delete", "iron", "--zone", ZONE, "--yes")
    assert gone.code == 0, gone.err
    assert "iron: deleted" in gone.out
    assert emulator.instances() == []


def test_what_compute_engine_cannot_do_here_is_refused_before_any_call(cli, emulator) -> None:
    r = cli("create", "old", "-a", "v4-8", "--api", "compute", "--zone", "us-central2-b")
    assert r.code == 2
    assert "'v4-8' is offered only through the Cloud TPU API (--api tpu)" in one_line_error(r)
    r = cli("create", "x", "-a", "tpu7x-8", "--api", "tpu", "--zone", ZONE)
    assert r.code == 2
    assert "'tpu7x-8' is offered only through Compute Engine (--api compute)" in r.err
    assert emulator.instances() == [] and emulator.nodes() == []


def test_the_ttl_is_compute_engines_to_enforce(cli, emulator) -> None:
    """--ttl becomes the VM's maxRunDuration with DELETE: Compute Engine ends it with no
    gc (the emulator's control plane ends the run now instead of in an hour)."""
    r = cli("create", "brief", "-a", "tpu7x-8", "--zone", ZONE, "--ttl", "1h")
    assert r.code == 0, r.err
    (sent,) = emulator.bodies("compute.instances.insert")
    scheduling = sent["body"]["scheduling"]
    assert scheduling["maxRunDuration"] == {"seconds": "3600"}
    assert scheduling["instanceTerminationAction"] == "DELETE"
    (instance,) = emulator.instances()
    assert emulator.advance(instance["name"]) == [instance["name"]]  # the hour is over
    assert emulator.instances() == []  # deleted by "Compute Engine" itself
    assert cli("describe", "brief", "--zone", ZONE).code == 4

    r = cli("create", "blink", "-a", "tpu7x-8", "--zone", ZONE, "--ttl", "10s")
    assert r.code == 2 and "maxRunDuration: 30 s to 120 days" in one_line_error(r, after_call=True)
    assert emulator.instances() == []


def test_stop_start_and_keep_a_compute_engine_vm(cli, emulator) -> None:
    assert cli("create", "pause", "-a", "tpu7x-8", "--zone", ZONE).code == 0
    stopped = cli("stop", "pause", "--zone", ZONE)
    assert stopped.code == 0, stopped.err
    assert stopped.out.split() == ["pause", ZONE, "STOPPED"]
    assert [i["status"] for i in emulator.instances()] == ["TERMINATED"]
    started = cli("start", "pause", "--zone", ZONE)
    assert started.code == 0 and started.out.split() == ["pause", ZONE, "READY"], started.err
    kept = cli("keep", "pause", "--zone", ZONE)
    assert kept.code == 0, kept.err
    shown = json.loads(cli("describe", "pause", "--zone", ZONE, "--json").out)
    assert shown["raw"]["labels"]["tpuctl-keep"] == "true"
    assert cli("delete", "pause", "--zone", ZONE, "--yes").code == 0


def test_a_vm_and_a_multislice_being_deleted_show_deleting(cli, emulator) -> None:
    """Compute Engine shows a VM being deleted as STOPPING, and a multislice whose VMs
    stop would read SUSPENDED: the delete that asked says DELETING."""
    assert cli("create", "vm", "-a", "tpu7x-8", "--zone", ZONE).code == 0
    assert cli("create", "ms", "-a", "tpu7x-8", "--zone", ZONE, "--slices", "2").code == 0
    emulator.config(durations={"delete": 2})  # seen under way by the delete's first look
    for name in ("vm", "ms"):
        r = cli("delete", name, "--zone", ZONE, "--yes", tty=True)
        assert r.code == 0, r.err
        shown = r.err.replace("\r", "\n")
        assert f"{name} DELETING" in shown, shown
        assert "STOPPING" not in shown and "SUSPENDED" not in shown, shown
    assert emulator.instances() == []
