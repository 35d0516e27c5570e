"""The emulated guest runs a node's `startup-script` metadata on every worker at boot."""

from __future__ import annotations

from pathlib import Path

from tests.emulator.ssh_helpers import create, delete, mine, wait_until

SCRIPT = '#!/bin/sh\necho "booted $TPU_WORKER_ID" > "$HOME/booted"\nsetsid sleep 600 &\n'


def test_startup_script_runs_on_every_worker_at_boot_and_goes_with_it(
    emulator, emulator_server
) -> None:  # noqa: ANN001
    pod = create(emulator, "boots", "v4-16", metadata={"startup-script": SCRIPT})
    backend = emulator_server.backend
    procs, everything = mine(emulator_server), mine(emulator_server, holders=True)
    homes = [Path(backend.worker_env(pod.name, k)["HOME"]) for k in range(2)]
    for k, home in enumerate(homes):
        wait_until(lambda h=home: (h / "booted").exists(), f"worker {k} to boot", timeout=30)
        wait_until(lambda h=home, k=k: (h / "booted").read_text() == f"booted {k}\n", "its line")
    wait_until(lambda: len(procs()) == 2, "the scripts' detached processes")
    delete(emulator, pod.name)
    wait_until(lambda: everything() == [], "no process left on the workers")


def test_startup_script_runs_again_on_start(emulator, emulator_server) -> None:  # noqa: ANN001
    vm = create(emulator, "again", "v3-8", metadata={"startup-script": SCRIPT})
    home = Path(emulator_server.backend.worker_env(vm.name, 0)["HOME"])
    everything = mine(emulator_server, holders=True)
    wait_until(lambda: (home / "booted").exists(), "the first boot", timeout=30)
    client = emulator.tpu_client()
    client.stop_node(request={"name": vm.name}).result()
    wait_until(lambda: everything() == [], "the worker's processes to go with it")
    (home / "booted").unlink()
    client.start_node(request={"name": vm.name}).result()
    wait_until(lambda: (home / "booted").exists(), "the second boot", timeout=30)
    delete(emulator, vm.name)
    wait_until(lambda: everything() == [], "no process left on the workers")
