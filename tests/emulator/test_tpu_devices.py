"""An emulated worker shows its TPU's device files where a TPU VM has them: /dev/accel0..
on v2-v4, /dev/vfio/0.. from v5e on, one per chip of the worker, files its processes can
open; the `no-device` fault takes them away, `unhealthy` is the node's health and
symptoms."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.emulator.ssh_helpers import create, delete, user_key
from tests.emulator.test_ssh_workers import run
from tpuctl.emulator.control.client import ControlError
from tpuctl.emulator.tpu import nodes as tpu_nodes

LIST = "ls /dev/accel* /dev/vfio 2>/dev/null; test -f /dev/{0} && echo x > /dev/{0} && echo wrote"


@pytest.mark.parametrize(
    ("accelerator", "shown", "first"),
    [
        ("v3-8", ["/dev/accel0", "/dev/accel1", "/dev/accel2", "/dev/accel3"], "accel0"),
        ("v5litepod-4", ["/dev/vfio:", "0", "1", "2", "3"], "vfio/0"),
    ],
)
def test_the_device_files_are_at_dev_per_generation_and_a_fault_removes_them(
    emulator: Any, emulator_server: Any, tmp_path: Path, accelerator: str, shown: list[str],
    first: str,
) -> None:  # fmt: skip
    pub, key = user_key(tmp_path)
    made = create(emulator, "devs", accelerator, metadata={"ssh-keys": f"alice:{pub}"})
    try:
        done = run(emulator, tmp_path, made, 0, "alice", key, LIST.format(first))
        assert done.exit_status == 0, done.stderr
        lines = done.stdout.decode().split()
        assert lines == [*shown, "wrote"]
        # the worker's own stand-in was written through /dev (a bind, not a copy)
        stand_ins = emulator_server.backend.workers.devices(_node(emulator_server, made), 0)
        assert stand_ins[0].read_text() == "x\n"
        said = emulator.worker_fault(made.name, "no-device")
        assert said["removed"][0] == f"/dev/{first}"
        done = run(emulator, tmp_path, made, 0, "alice", key, LIST.format(first))
        assert done.stdout.decode().split() == []
        # another fault (which prepares the worker again) does not bring them back
        emulator.worker_fault(made.name, "stale-lockfile")
        done = run(emulator, tmp_path, made, 0, "alice", key, "ls /dev/accel* /dev/vfio/* | wc -l")
        assert done.stdout.decode().split() == ["0"]
    finally:
        delete(emulator, made.name)


def _node(emulator_server: Any, made: Any) -> Any:
    return tpu_nodes.by_name(emulator_server.backend.state, made.name)


def test_unhealthy_shows_in_the_nodes_health_and_symptoms(emulator: Any) -> None:
    made = create(emulator, "sick", "v3-8")
    try:
        said = emulator.worker_fault(made.name, "unhealthy")
        assert said["health"] == "UNHEALTHY_TENSORFLOW"
        node = next(n for n in emulator.nodes() if n["name"] == made.name)
        assert node["health"] == "UNHEALTHY_TENSORFLOW"
        assert [(s["symptomType"], s["workerId"]) for s in node["symptoms"]] == [
            ("MESH_BUILD_FAIL", "0")
        ]
        got = emulator.tpu_client().get_node(name=made.name)  # as the API answers it
        assert got.health.name == "UNHEALTHY_TENSORFLOW"
        assert got.symptoms[0].symptom_type.name == "MESH_BUILD_FAIL"
        emulator.worker_fault(
            made.name, "unhealthy", health="TIMEOUT",
            symptoms=[{"symptomType": "EXECUTE_TIMED_OUT", "details": "stuck", "workerId": "0"}],
        )  # fmt: skip
        node = next(n for n in emulator.nodes() if n["name"] == made.name)
        assert node["health"] == "TIMEOUT"
        assert node["symptoms"][0]["details"] == "stuck"
        with pytest.raises(ControlError, match="health must be one of"):
            emulator.worker_fault(made.name, "unhealthy", health="SICK")
    finally:
        delete(emulator, made.name)
