"""TensorCore use of Compute Engine TPU VMs and slices from Cloud Monitoring: the monitored
resource their metrics are on is asked of the metric's descriptor, each VM's series is
joined to its slice and worker number, and `top`, `list` and `gc --idle` read them with
no SSH; where a VM has no metrics, gc falls back on its SSH probe and says so."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from google.api_core import exceptions as gx

from tests.cli.test_gc_compute import set_label
from tests.emulator.ssh_helpers import wait_until
from tpuctl.emulator.workers import ssh as ssh_workers

ZONE = "us-east1-d"


def _devices(emulator_server: Any, name: str) -> list[list[Path]]:
    """Each worker's TPU device files of the Compute Engine node `name`, in worker order."""
    backend = emulator_server.backend

    def host() -> Any:
        with backend.lock:
            return next(h for h in backend.compute_hosts if h.node_id == name)

    # its workers booted (they touch their devices then publish their host keys): a
    # device's time set from here on stays
    wait_until(lambda: all(host().guest_attributes), f"the workers of {name} booted", 30)
    with backend.lock:
        found = [backend.workers.devices(host(), k) for k in range(len(host().addresses))]
    assert all(d.exists() for devices in found for d in devices)
    return found


def _last_used(devices: list[Path], seconds_ago: float) -> None:
    then = time.time() - seconds_ago
    for d in devices:
        os.utime(d, (then, then))


def _step(devices: list[Path], percent: str) -> None:
    for d in devices:
        with open(d, "a") as f:
            f.write(percent + "\n")


def test_a_slice_and_a_vm_show_their_tensorcores_and_idle_ones_are_collected(
    cli: Any, emulator: Any, emulator_server: Any
) -> None:
    assert cli("create", "s", "-a", "v6e-16", "--api", "compute", "--zone", ZONE).code == 0
    assert cli("create", "lone", "-a", "v6e-8", "--api", "compute", "--zone", ZONE).code == 0
    workers = _devices(emulator_server, "s")
    (lone,) = _devices(emulator_server, "lone")
    assert len(workers) == 4
    for devices in [*workers, lone]:
        _last_used(devices, 7200)
    emulator.sample()
    _step(workers[2], "60")  # worker 2 of the slice works; the others and the VM do not
    emulator.sample()
    ssh_before = ssh_workers.CONNECTIONS[0]

    r = cli("top", "--json")
    assert r.code == 0, r.err
    rows = {row["name"]: row for row in json.loads(r.out)}
    assert sorted(rows) == ["lone", "s"]
    assert rows["s"]["idleSeconds"] == 0  # one busy worker: the slice is not idle
    assert rows["s"]["utilization"] == 7.5  # worker 2's minute (0 then 60) over 4 workers
    assert rows["lone"]["utilization"] == 0.0 and rows["lone"]["idleSeconds"] >= 7200

    listed = cli("list", "--zone", ZONE)
    assert listed.code == 0, listed.err
    cells = {line.split()[0]: line.split() for line in listed.out.strip().splitlines()[1:]}
    assert "0%" in cells["lone"] and "2h" in cells["lone"]

    r = cli("gc", "--yes", "--idle", "30m")
    assert r.code == 0, r.err
    assert ("deleted lone (us-east1-d, v6e-8): idle (limit 30m): TensorCores idle for 2h on "
            "its 1 worker(s) (evidence: metrics)") in r.out  # fmt: skip
    assert "keep s (us-east1-d): TensorCores idle for 0s at the last sample" in r.err
    assert ssh_workers.CONNECTIONS[0] == ssh_before  # no SSH at all
    assert not any(i["name"].endswith("/instances/lone") for i in emulator.instances())
    assert sum("/instances/s-" in i["name"] for i in emulator.instances()) == 4
    assert cli("delete", "s", "--zone", ZONE, "--yes").code == 0


def test_without_metrics_gc_probes_a_compute_vm_over_ssh_and_says_so(
    cli: Any, emulator: Any, emulator_server: Any
) -> None:
    assert cli("create", "quiet", "-a", "v6e-8", "--api", "compute", "--zone", ZONE).code == 0
    (devices,) = _devices(emulator_server, "quiet")
    _last_used(devices, 7200)  # no sample taken: Cloud Monitoring has nothing of it
    set_label(emulator, "quiet", "tpuctl-created", str(int(time.time()) - 7200))
    ssh_before = ssh_workers.CONNECTIONS[0]

    r = cli("gc", "--yes", "--idle", "30m")
    assert r.code == 0, r.err
    assert "deleted quiet (us-east1-d, v6e-8): idle for 2h (limit 30m): " in r.out
    assert "(evidence: probe)" in r.out
    assert ssh_workers.CONNECTIONS[0] > ssh_before  # looked at over SSH, through Compute Engine
    assert emulator.instances() == []
    log = Path(os.environ["XDG_STATE_HOME"]) / "tpuctl" / "gc.log"
    (entry,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert (entry["node"], entry["evidence"], entry["result"]) == ("quiet", "probe", "deleted")


def test_the_metrics_descriptor_names_the_resource_a_compute_vm_writes_on(
    cli: Any, emulator: Any, emulator_server: Any
) -> None:
    from tests.emulator.test_monitoring import IDLE, client, series

    (found,) = client(emulator).list_metric_descriptors(
        request={"name": "projects/tpuctl-demo", "filter": f'metric.type = "{IDLE}"'}
    )
    assert list(found.monitored_resource_types) == ["tpu_worker", "gce_instance"]
    prefixed = client(emulator).list_metric_descriptors(
        request={
            "name": "projects/tpuctl-demo",
            "filter": 'metric.type = starts_with("tpu.googleapis.com/accelerator/")',
        }
    )
    assert {d.type.rsplit("/", 1)[-1] for d in prefixed} == {
        "duty_cycle",
        "tensorcore_utilization",
        "memory_used",
        "memory_total",
    }
    with pytest.raises(gx.InvalidArgument, match="Could not parse the filter"):
        list(
            client(emulator).list_metric_descriptors(
                request={"name": "projects/tpuctl-demo", "filter": "metric.kind = GAUGE"}
            )
        )

    assert cli("create", "one", "-a", "v6e-8", "--api", "compute", "--zone", ZONE).code == 0
    _devices(emulator_server, "one")
    emulator.sample()
    vm = json.loads(cli("describe", "one", "--zone", ZONE, "--json").out)["raw"]
    on_vm = series(emulator, IDLE, ' AND resource.type = "gce_instance"')
    assert {(s.resource.labels["instance_id"], s.resource.labels["zone"]) for s in on_vm} == {
        (vm["id"], ZONE)}  # fmt: skip
    assert series(emulator, IDLE, ' AND resource.type = "tpu_worker"') == []
    assert cli("delete", "one", "--zone", ZONE, "--yes").code == 0
