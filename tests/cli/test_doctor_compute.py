"""tpuctl doctor NODE on Compute Engine: the same chain (state, SSH, devices, lockfile,
holders, framework, disk, memory, last job) on a single TPU VM and on every VM of a
slice, in worker order; a fault on one VM fails that worker's check only; a slice that
lost a VM fails its state check and is not examined further."""

from __future__ import annotations

import json

import requests

from tests.cli.test_doctor_node import _checks, _status, with_libtpu

ZONE = "us-east1-d"
P = "projects/tpuctl-demo"
CHAIN = ("node-state", "ssh", "tpu-devices", "libtpu-lockfile", "tpu-holder", "framework",
         "disk", "memory")  # fmt: skip


def _sound(cli, emulator, name: str, kind: str, workers: int) -> dict[str, list[dict]]:  # type: ignore[type-arg]  # noqa: ANN001
    """Every check of the chain passes on the node `name` (its `kind`: instances or
    instanceGroupManagers, of `workers` VMs); its checks."""
    with_libtpu(emulator, f"{P}/zones/{ZONE}/{kind}/{name}", workers)
    r = cli("doctor", name, "--zone", ZONE, "--json")
    assert r.code == 0, r.out + r.err
    assert json.loads(r.out)["node"] == name
    checks = _checks(r.out)
    for check in CHAIN:
        assert _status(checks, check) == {"pass"}, checks[check]
    return checks


def test_every_vm_of_a_slice_is_examined_in_worker_order(cli, emulator) -> None:  # noqa: ANN001
    assert cli("create", "ds", "-a", "v6e-16", "--api", "compute", "--zone", ZONE).code == 0
    try:
        checks = _sound(cli, emulator, "ds", "instanceGroupManagers", 4)
        assert [c["worker"] for c in checks["ssh"]] == [0, 1, 2, 3]
        assert [c["worker"] for c in checks["tpu-devices"]] == [0, 1, 2, 3]
        assert "the VM's image pins no framework" in checks["framework"][0]["summary"]
        text = cli("doctor", "ds", "--zone", ZONE)
        assert text.code == 0 and "PASS  node-state" in text.out and "0 fail" in text.out

        emulator.worker_fault(f"{P}/locations/{ZONE}/nodes/ds", "stale-lockfile", worker=2)
        r = cli("doctor", "ds", "--zone", ZONE, "--json")
        assert r.code == 1
        lock = {c["worker"]: c["status"] for c in _checks(r.out)["libtpu-lockfile"]}
        assert lock == {0: "pass", 1: "pass", 2: "fail", 3: "pass"}
        assert cli("doctor", "ds", "--zone", ZONE, "--fix").code == 0

        vm = next(i["name"] for i in emulator.instances() if "/instances/ds-" in i["name"])
        requests.delete(f"http://{emulator.address}/compute/v1/{vm}", timeout=30)
        emulator.advance()
        r = cli("doctor", "ds", "--zone", ZONE, "--json")
        assert r.code == 1
        checks = _checks(r.out)
        (state,) = checks["node-state"]
        assert state["status"] == "fail" and "TERMINATED" in state["summary"]
        assert "1 of 4 VMs lost" in " ".join(state["evidence"])
        assert _status(checks, "ssh") == {"skip"}
    finally:
        assert cli("delete", "ds", "--zone", ZONE, "--yes").code == 0


def test_a_single_compute_vm_passes_the_chain(cli, emulator) -> None:  # noqa: ANN001
    assert cli("create", "dv", "-a", "v6e-8", "--api", "compute", "--zone", ZONE).code == 0
    try:
        checks = _sound(cli, emulator, "dv", "instances", 1)
        assert [c["worker"] for c in checks["ssh"]] == [0]
    finally:
        assert cli("delete", "dv", "--zone", ZONE, "--yes").code == 0


def test_a_holder_waiting_on_its_tpu_is_busy_by_the_vms_tensorcores(cli, emulator) -> None:  # noqa: ANN001
    """On Compute Engine the TensorCore points are the VM's (a gce_instance): a holder
    using little CPU while its TPU works is found busy by them, as on the TPU API."""
    assert cli("create", "dh", "-a", "v6e-8", "--api", "compute", "--zone", ZONE).code == 0
    try:
        emulator.worker_fault(f"{P}/locations/{ZONE}/nodes/dh", "tpu-busy")
        emulator.sample()  # the device was written before the fault answered: a busy point
        r = cli("doctor", "dh", "--zone", ZONE, "--json")
        (holder,) = _checks(r.out)["tpu-holder"]
        assert holder["status"] == "warn" and "idle" not in holder["summary"], holder
        assert " busy (" in holder["evidence"][0]
        assert "; TensorCores idle for 0s)" in holder["evidence"][0], holder["evidence"]
    finally:
        assert cli("delete", "dh", "--zone", ZONE, "--yes").code == 0
