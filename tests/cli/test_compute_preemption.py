"""Spot preemption on Compute Engine (the emulator's control plane): the VM's metadata
server says `instance/preempted` TRUE for the notice, then Compute Engine ends the VM
as its instanceTerminationAction says (DELETE: gone; STOP: TERMINATED); a slice's group
does not make a lost VM again, and tpuctl shows the slice PREEMPTED."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import requests

from tests.cli.conftest import one_line_error
from tests.emulator.ssh_helpers import wait_until

ZONE = "us-central1-c"
SLICE_ZONE = "us-east1-d"
PROJECT = "tpuctl-demo"


def _preempted(emulator, node: str, worker: int = 0, zone: str = ZONE) -> str:  # noqa: ANN001
    url = (f"http://{emulator.address}/_emulator/v1/metadata/{PROJECT}/{zone}/{node}/{worker}"
           "/computeMetadata/v1/instance/preempted")  # fmt: skip
    request = urllib.request.Request(url, headers={"Metadata-Flavor": "Google"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return str(answer.read().decode())


def test_a_preempted_spot_vm_gets_its_notice_then_is_deleted(cli, emulator) -> None:
    assert cli("create", "sp", "-a", "tpu7x-8", "--zone", ZONE, "--spot").code == 0
    assert _preempted(emulator, "sp") == "FALSE"
    (vm,) = emulator.instances()
    emulator.preempt_instance(vm["name"], notice=30)
    assert _preempted(emulator, "sp") == "TRUE"  # the notice: still running
    assert [i["status"] for i in emulator.instances()] == ["RUNNING"]
    assert emulator.advance(vm["name"]) == [vm["name"]]  # the notice is over
    assert emulator.instances() == []  # instanceTerminationAction DELETE
    assert cli("describe", "sp", "--zone", ZONE).code == 4


def test_a_vm_with_stop_as_its_termination_action_is_stopped(emulator) -> None:
    base = f"http://{emulator.address}/compute/v1/projects/{PROJECT}/zones/{ZONE}"
    body = {
        "name": "stopper",
        "machineType": f"zones/{ZONE}/machineTypes/tpu7x-standard-4t",
        "scheduling": {"onHostMaintenance": "TERMINATE", "provisioningModel": "SPOT",
                       "automaticRestart": False, "instanceTerminationAction": "STOP"},
    }  # fmt: skip
    request = urllib.request.Request(
        f"{base}/instances",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    urllib.request.urlopen(request, timeout=10).close()
    emulator.advance(f"projects/{PROJECT}/zones/{ZONE}/instances/stopper")
    emulator.preempt_instance("stopper", notice=0)
    assert [i["status"] for i in emulator.instances()] == ["TERMINATED"]
    request = urllib.request.Request(f"{base}/instances/stopper", method="DELETE")
    urllib.request.urlopen(request, timeout=10).close()
    emulator.advance()
    assert emulator.instances() == []


def test_only_a_running_spot_vm_is_preempted(cli, emulator) -> None:
    assert cli("create", "std", "-a", "tpu7x-8", "--zone", ZONE).code == 0
    (vm,) = emulator.instances()
    try:
        emulator.preempt_instance(vm["name"])
    except Exception as e:  # noqa: BLE001 - the control plane's refusal
        assert "not a Spot VM" in str(e)
    else:
        raise AssertionError("a standard VM was preempted")
    assert cli("delete", "std", "--zone", ZONE, "--yes").code == 0


def test_a_preempted_worker_leaves_the_slice_preempted(cli, emulator) -> None:
    r = cli("create", "ss", "-a", "v6e-16", "--api", "compute", "--zone", SLICE_ZONE, "--spot")
    assert r.code == 0, r.err
    vms = sorted(i["name"] for i in emulator.instances() if "/instances/" in i["name"])
    assert len(vms) == 4
    emulator.preempt_instance(vms[0], notice=0)
    emulator.advance()
    assert len([i for i in emulator.instances() if "/instances/" in i["name"]]) == 3  # not remade
    listed = cli("list", "--zone", SLICE_ZONE)
    assert listed.out.splitlines()[1].split()[:5] == [
        "ss", SLICE_ZONE, "v6e-16", "compute", "PREEMPTED"
    ], listed.out  # fmt: skip
    shown = cli("describe", "ss", "--zone", SLICE_ZONE)
    assert "1 of 4 VMs lost" in shown.out, shown.out
    gone = cli("delete", "ss", "--zone", SLICE_ZONE, "--yes")
    assert gone.code == 0, one_line_error(gone) if gone.err else gone.out
    assert emulator.instances() == []


def test_emulator_preempt_takes_a_compute_engine_vm_by_its_node_name(cli, emulator) -> None:
    assert cli("create", "cv", "-a", "tpu7x-8", "--zone", ZONE, "--spot").code == 0
    r = cli("emulator", "preempt", "cv", "--zone", ZONE, "--notice", "5")
    assert r.code == 0, r.err
    assert "preempting cv in us-central1-c: its notice has begun" in r.err
    assert _preempted(emulator, "cv") == "TRUE"
    (vm,) = emulator.instances()
    assert emulator.advance(vm["name"]) == [vm["name"]]
    assert emulator.instances() == []  # tpuctl's VMs are deleted on preemption


def test_emulator_preempt_takes_one_vm_of_a_compute_engine_slice_by_worker(cli, emulator) -> None:
    r = cli("create", "cs", "-a", "v6e-16", "--api", "compute", "--zone", SLICE_ZONE, "--spot")
    assert r.code == 0, r.err
    whole = cli("emulator", "preempt", "cs", "--zone", SLICE_ZONE)
    assert whole.code == 1 and "cs is a slice of 4 VMs: name one with worker (0 to 3)" in whole.err
    wrong = cli("emulator", "preempt", "cs", "--zone", SLICE_ZONE, "--worker", "4")
    assert wrong.code == 1 and "worker must be 0 to 3 for cs" in wrong.err, wrong.err
    r = cli("emulator", "preempt", "cs", "--zone", SLICE_ZONE, "--worker", "2", "--notice", "30")
    assert r.code == 0, r.err
    assert "preempting worker 2 of cs in us-east1-d: its notice has begun" in r.err
    seen = [_preempted(emulator, "cs", k, SLICE_ZONE) for k in range(4)]
    assert seen == ["FALSE", "FALSE", "TRUE", "FALSE"]  # that VM's notice, the others' none
    assert emulator.advance() != []  # the notice is over: that VM is deleted, not remade
    assert len([i for i in emulator.instances() if "/instances/" in i["name"]]) == 3
    assert cli("delete", "cs", "--zone", SLICE_ZONE, "--yes").code == 0


def test_emulator_preempt_takes_a_slice_vm_by_its_own_name(cli, emulator) -> None:
    """The name `gcloud compute instances list` shows for a VM of a slice (its group's
    base name and a random suffix) preempts that VM, as its worker number would."""
    from tpuctl.cloud.compute.slice_state import worker_number

    r = cli("create", "vs", "-a", "v6e-16", "--api", "compute", "--zone", SLICE_ZONE, "--spot")
    assert r.code == 0, r.err
    listed = requests.get(f"http://{emulator.address}/compute/v1/projects/{PROJECT}/zones/"
                          f"{SLICE_ZONE}/instances", timeout=30).json()["items"]  # fmt: skip
    vm = next(i["name"] for i in listed if worker_number(i) == 1)
    assert vm.startswith("vs-") and vm != "vs"
    wrong = cli("emulator", "preempt", vm, "--zone", SLICE_ZONE, "--worker", "3")
    assert wrong.code == 1 and f"VM {vm} is worker 1 of vs" in wrong.err, wrong.err
    r = cli("emulator", "preempt", vm, "--zone", SLICE_ZONE, "--notice", "30")
    assert r.code == 0, r.err
    assert f"preempting VM {vm} (worker 1 of vs) in us-east1-d: its notice has begun" in r.err
    seen = [_preempted(emulator, "vs", k, SLICE_ZONE) for k in range(4)]
    assert seen == ["FALSE", "TRUE", "FALSE", "FALSE"]  # that VM's notice, the others' none
    assert emulator.advance() != []
    left = [
        i["name"].rsplit("/", 1)[-1] for i in emulator.instances() if "/instances/" in i["name"]
    ]
    assert len(left) == 3 and vm not in left  # that VM deleted, not remade
    assert cli("delete", "vs", "--zone", SLICE_ZONE, "--yes").code == 0


def test_emulator_preempt_names_a_node_that_is_on_neither_api(cli, emulator) -> None:
    r = cli("emulator", "preempt", "nowhere", "--zone", ZONE)
    assert r.code == 1
    assert "no node nowhere in us-central1-c: neither a Cloud TPU API node nor a Compute" in r.err


BEAT = "setsid sh -c 'while :; do echo >> ~/beat; sleep 0.1; done' > /dev/null 2>&1 < /dev/null &"


def test_the_other_vms_of_a_slice_run_on_when_one_is_preempted(
    cli, emulator, emulator_server
) -> None:  # noqa: ANN001
    """Each VM of a slice is a machine of its own: when one is preempted and deleted, the
    others' processes and metadata servers carry on (so their agents can still save what
    they have)."""
    r = cli("create", "on", "-a", "v6e-16", "--api", "compute", "--zone", SLICE_ZONE, "--spot")
    assert r.code == 0, r.err
    try:
        _beats_go_on_elsewhere(cli, emulator, emulator_server.backend)
    finally:
        assert cli("delete", "on", "--zone", SLICE_ZONE, "--yes").code == 0
    assert emulator.instances() == []


def _beats_go_on_elsewhere(cli, emulator, backend) -> None:  # noqa: ANN001
    started = cli("exec", "on", "--zone", SLICE_ZONE, "--", "sh", "-c", BEAT)
    assert started.code == 0, started.err
    with backend.lock:
        (host,) = [h for h in backend.compute_hosts if h.node_id == "on"]
        homes = [Path(backend.node_env(host, k)["HOME"]) for k in range(4)]
        doomed = host.instances[2].path  # the slice is whole: worker 2's VM
    wait_until(lambda: all((h / "beat").exists() for h in homes), "every worker's beat")
    emulator.preempt_instance(doomed.rsplit("/", 1)[-1], notice=0)
    emulator.advance()
    assert len([i for i in emulator.instances() if "/instances/" in i["name"]]) == 3
    others = [0, 1, 3]
    before = {k: (homes[k] / "beat").stat().st_size for k in others}
    grown = lambda: all((homes[k] / "beat").stat().st_size > before[k] for k in others)  # noqa: E731
    wait_until(grown, "the other workers' beats to go on", 30)
    assert [_preempted(emulator, "on", k, SLICE_ZONE) for k in others] == ["FALSE"] * 3


def test_a_spot_vm_deleted_at_its_preemption_is_told_preempted_not_deleted(cli, emulator) -> None:
    """tpuctl's spot VMs end with instanceTerminationAction DELETE: once preempted they
    are gone, as a deleted VM is; the zone's `compute.instances.preempted` operation
    tells the two apart (what a run then says of the node: PREEMPTED, not DELETED)."""
    from tpuctl.cloud import registry
    from tpuctl.cloud.clients import ClientFactory

    for name in ("gone", "kept"):
        assert cli("create", name, "-a", "tpu7x-8", "--zone", ZONE, "--spot").code == 0
    emulator.preempt_instance("gone", notice=0)  # no notice: deleted at once
    emulator.advance()
    assert [i["name"].rsplit("/", 1)[-1] for i in emulator.instances()] == ["kept"]
    backend = registry.kind("compute").build(ClientFactory())
    parent = f"projects/{PROJECT}/locations/{ZONE}/nodes"
    assert backend.gone_state(f"{parent}/gone") == "PREEMPTED"
    assert cli("delete", "kept", "--zone", ZONE, "--yes").code == 0
    assert backend.gone_state(f"{parent}/kept") == "DELETED"
    ops = emulator.requests()
    assert ops.get("GET compute.zoneOperations.list") == 2, ops
