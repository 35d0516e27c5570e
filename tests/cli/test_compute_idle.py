"""The idle watchdog on Compute Engine: a TPU7x VM created with --idle-timeout deletes
itself once idle, with no client and no cron; on a slice each VM's watchdog labels its
own VM while busy, and worker 0 deletes the slice's group only when every VM has been
idle past the limit. (The watchdogs check every half second: `tpuctl-idle-interval`.)"""

from __future__ import annotations

import json
import time
import urllib.request

from tests.cli.test_idle_watchdog import FAST, HOLD
from tests.cli.test_run_compute import _kinds
from tests.emulator.ssh_helpers import wait_until

TPU7X = ("-a", "tpu7x-8", "--zone", "us-central1-c")
SLICE = ("-a", "v6e-16", "--api", "compute", "--zone", "us-east1-d")


def _vms(emulator) -> list[dict]:  # noqa: ANN001
    """The slice's VMs as Compute Engine lists them: worker number and labels."""
    url = f"http://{emulator.address}/compute/v1/projects/tpuctl-demo/zones/us-east1-d/instances"
    items = json.loads(urllib.request.urlopen(url).read()).get("items") or []
    return [{"worker": {m["key"]: m.get("value") for m in vm["metadata"]["items"]}.get("worker-id"),
             "labels": vm.get("labels") or {}} for vm in items]  # fmt: skip


def set_label(emulator, zone: str, vm: str, key: str, value: str) -> None:  # noqa: ANN001
    """Label a VM as another client would (`instances.setLabels` with its fingerprint)."""
    url = f"http://{emulator.address}/compute/v1/projects/tpuctl-demo/zones/{zone}/instances/{vm}"
    current = json.loads(urllib.request.urlopen(url).read())
    body = {"labels": {**current.get("labels", {}), key: value},
            "labelFingerprint": current["labelFingerprint"]}  # fmt: skip
    request = urllib.request.Request(
        f"{url}/setLabels", data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    urllib.request.urlopen(request).close()


def test_a_tpu7x_vm_left_alone_deletes_itself(cli, emulator) -> None:
    r = cli("create", "alone", *TPU7X, "--idle-timeout", "3s", *FAST)
    assert r.code == 0, r.err
    wait_until(lambda: emulator.instances() == [], "the VM to delete itself", timeout=60)


def test_a_slice_stays_while_one_vm_is_busy_and_goes_once_all_are_idle(cli, emulator) -> None:
    r = cli("create", "busy", *SLICE, "--idle-timeout", "3s", *FAST)
    assert r.code == 0, r.err
    r = cli("ssh", "busy", "--zone", "us-east1-d", "--worker", "2", "--command", HOLD)
    assert r.code == 0, r.err
    holder = int(r.out.split()[-1])

    made = time.time()

    # worker 2's watchdog labels its own VM (labels are per VM) past the slice's limit,
    # and worker 0, itself idle, reads the newest of them all and keeps the slice
    def marked_past_limit() -> bool:
        stamps = [vm["labels"].get("tpuctl-last-active") for vm in _vms(emulator)]
        return any(s and int(s) > made + 4 for s in stamps)

    try:
        wait_until(marked_past_limit, "worker 2 to mark the slice active", timeout=60)
        marked = [vm["worker"] for vm in _vms(emulator) if "tpuctl-last-active" in vm["labels"]]
        assert marked == ["2"]
        log = cli("ssh", "busy", "--zone", "us-east1-d", "--worker", "2", "--command",
                  "cat ~/.tpuctl/idle-watchdog.log")  # fmt: skip
        assert f"busy: pid {holder} (sleep 600) holds " in log.out
        assert _kinds(emulator).count("instance") == 4  # past its 3 s limit, kept by worker 2
    finally:
        # let go of the TPU (a pid worker 2 numbers): now every VM is idle
        cli(
            "ssh", "busy", "--zone", "us-east1-d", "--worker", "2", "--command", f"kill -9 {holder}"
        )
    wait_until(lambda: "instance" not in _kinds(emulator), "the slice to go", timeout=90)
    assert "group" not in _kinds(emulator)
    r = cli("delete", "busy", "--zone", "us-east1-d", "--yes")  # its template and policy
    assert r.code == 0, r.err
    assert emulator.instances() == []


def test_a_tpu7x_vm_whose_tpu_is_held_but_unused_is_stopped(cli, emulator) -> None:
    """The forgotten notebook: a process holds the TPU and never computes. Cloud
    Monitoring's idle time for the VM (its `gce_instance` series, by its instance id, as
    the metric's descriptor says) overrules the holder, and the watchdog stops the VM."""
    r = cli("create", "notebook", *TPU7X, "--idle-timeout", "1h", "--idle-action", "stop", *FAST)
    assert r.code == 0, r.err
    r = cli("ssh", "notebook", "--zone", "us-central1-c", "--command", HOLD)
    assert r.code == 0 and r.out.split()[-1].isdigit(), r.err  # a holder's pid
    try:
        set_label(emulator, "us-central1-c", "notebook", "tpuctl-idle-timeout", "3")
        emulator.monitoring(sample_period=0.5)  # Cloud Monitoring sees its TensorCores idle
        wait_until(lambda: [i["status"] for i in emulator.instances()] == ["TERMINATED"],
                   "the watchdog to stop the VM", timeout=90)  # fmt: skip
    finally:  # stopped, or not: the delete takes the holder with the VM
        assert cli("delete", "notebook", "--zone", "us-central1-c", "--yes").code == 0
