"""The idle watchdog on the node: a node created with --idle-timeout deletes itself once
idle, with no client and no cron; a busy node and a kept node stay.

The watchdog checks every `tpuctl-idle-interval` seconds (node metadata, default 60):
these nodes say half a second. Each test waits for an event (bounded, to stop a hang).
"""

from __future__ import annotations

import time

from tests.cli.test_gc import PARENT, Z, names, set_label
from tests.emulator.ssh_helpers import mine, wait_until

FAST = ("--metadata", "tpuctl-idle-interval=0.5")
HOLD = 'setsid sleep 600 < "${TPUCTL_TPU_DEVICES%%,*}" > /dev/null 2>&1 & echo $!'
LOG = "cat ~/.tpuctl/idle-watchdog.log"


def labels(emulator, node: str) -> dict[str, str]:  # noqa: ANN001
    return dict(emulator.tpu_client().get_node(name=f"{PARENT}/nodes/{node}").labels)


def test_a_node_left_alone_deletes_itself(emulator_server, cli, emulator) -> None:
    procs = mine(emulator_server, holders=True)
    r = cli("create", "alone", "-a", "v3-8", "--zone", Z, "--idle-timeout", "3s", *FAST)
    assert r.code == 0, r.err
    wait_until(lambda: names(emulator) == [], "the node to delete itself", timeout=60)
    wait_until(lambda: procs() == [], "no process left on the workers")


def test_a_node_whose_device_is_held_is_kept_alive_by_its_watchdog(
    emulator_server, cli, emulator
) -> None:
    procs = mine(emulator_server, holders=True)
    r = cli("create", "held", "-a", "v3-8", "--zone", Z, "--idle-timeout", "1h", *FAST)
    assert r.code == 0, r.err
    r = cli("ssh", "held", "--zone", Z, "--command", HOLD)
    assert r.code == 0, r.err
    holder = int(r.out.split()[-1])
    set_label(emulator, "held", "tpuctl-idle-timeout", "2")
    shortened = time.time()

    # The watchdog keeps marking the node active past the moment an idle one would go.
    def marked_after_limit() -> bool:
        last = labels(emulator, "held").get("tpuctl-last-active")
        return last is not None and int(last) > shortened + 3

    wait_until(marked_after_limit, "the watchdog to mark the node active", timeout=60)
    assert names(emulator) == ["held"]
    r = cli("ssh", "held", "--zone", Z, "--command", LOG)
    assert f"busy: pid {holder} (sleep 600) holds " in r.out

    # let go of the TPU (a pid its worker numbers): now it is idle
    assert cli("ssh", "held", "--zone", Z, "--command", f"kill -9 {holder}").code == 0
    wait_until(lambda: names(emulator) == [], "the node to delete itself", timeout=60)
    wait_until(lambda: procs() == [], "no process left on the workers")


def test_a_forgotten_notebook_holding_an_idle_tpu_is_stopped_and_named(
    emulator_server, cli, emulator
) -> None:
    import getpass
    import json
    from pathlib import Path

    procs = mine(emulator_server, holders=True)
    r = cli("create", "notebook", "-a", "v3-8", "--zone", Z, "--idle-timeout", "1h",
            "--idle-action", "stop", *FAST)  # fmt: skip
    assert r.code == 0, r.err
    r = cli("ssh", "notebook", "--zone", Z, "--command", HOLD)  # holds, never computes
    assert r.code == 0, r.err
    holder = int(r.out.split()[-1])
    home = Path(emulator_server.backend.worker_env(f"{PARENT}/nodes/notebook", 0)["HOME"])
    emulator.monitoring(sample_period=0.5)  # Cloud Monitoring sees its TensorCores idle
    set_label(emulator, "notebook", "tpuctl-idle-timeout", "3")

    def state() -> str:
        return str(emulator.nodes()[0]["state"])

    wait_until(lambda: state() == "STOPPED", "the watchdog to stop the node", timeout=60)
    wait_until(lambda: procs() == [], "no process left on the workers")
    me = getpass.getuser()
    log = (home / ".tpuctl" / "idle-watchdog.log").read_text()
    assert f"TPU held but unused by pid {holder} (sleep 600) of user {me}" in log
    entry = json.loads((home / ".tpuctl" / "idle-audit.log").read_text().splitlines()[-1])
    assert (entry["node"], entry["result"], entry["evidence"]) == ("notebook", "stop", "watchdog")
    (held,) = entry["holders"]
    assert (held["pid"], held["command"], held["user"]) == (holder, "sleep 600", me)
    assert held["tensorcoreIdleSeconds"] >= 3
    assert cli("delete", "notebook", "--zone", Z, "--yes").code == 0


# A process that holds the TPU and computes: a step every 0.1 s (docs/metrics.md)
COMPUTE = (
    "setsid python3 -c 'import os, time\n"
    'd = open(os.environ["TPUCTL_TPU_DEVICES"].split(",")[0], "a")\n'
    'while True: d.write("90\\n"); d.flush(); time.sleep(0.1)\' > /dev/null 2>&1 & echo $!'
)


def test_a_holder_that_computes_keeps_its_node_with_metrics_on(
    emulator_server, cli, emulator
) -> None:
    procs = mine(emulator_server, holders=True)
    r = cli("create", "trainer", "-a", "v3-8", "--zone", Z, "--idle-timeout", "1h", *FAST)
    assert r.code == 0, r.err
    r = cli("ssh", "trainer", "--zone", Z, "--command", COMPUTE)
    assert r.code == 0, r.err
    worker = int(r.out.split()[-1])
    emulator.monitoring(sample_period=0.5)
    set_label(emulator, "trainer", "tpuctl-idle-timeout", "2")
    shortened = time.time()

    def marked_after_limit() -> bool:
        last = labels(emulator, "trainer").get("tpuctl-last-active")
        return last is not None and int(last) > shortened + 3

    wait_until(marked_after_limit, "the watchdog to mark the node active", timeout=60)
    assert names(emulator) == ["trainer"]
    assert cli("ssh", "trainer", "--zone", Z, "--command", f"kill -9 {worker}").code == 0
    assert cli("delete", "trainer", "--zone", Z, "--yes").code == 0
    wait_until(lambda: procs() == [], "no process left on the workers")


def test_a_kept_node_is_not_deleted_by_its_watchdog(cli, emulator) -> None:
    r = cli("create", "kept", "-a", "v3-8", "--zone", Z, "--idle-timeout", "1h", *FAST)
    assert r.code == 0, r.err
    assert cli("keep", "kept", "--zone", Z).code == 0
    r = cli("describe", "kept", "--zone", Z)
    assert "/1h (idle for / limit" in r.out
    set_label(emulator, "kept", "tpuctl-idle-timeout", "1")

    def said_kept() -> bool:
        r = cli("ssh", "kept", "--zone", Z, "--command", LOG)
        return "but kept (tpuctl-keep=true)" in r.out

    wait_until(lambda: names(emulator) != ["kept"] or said_kept(), "the watchdog", timeout=60)
    assert names(emulator) == ["kept"]
    assert cli("keep", "kept", "--off", "--zone", Z).code == 0  # the cloud is the truth
    wait_until(lambda: names(emulator) == [], "the node to delete itself", timeout=60)


def test_idle_action_stop_stops_a_single_host_node(emulator_server, cli, emulator) -> None:
    procs = mine(emulator_server, holders=True)
    r = cli("create", "nap", "-a", "v3-8", "--zone", Z, "--idle-timeout", "2s",
            "--idle-action", "stop", *FAST)  # fmt: skip
    assert r.code == 0, r.err

    def state() -> str:
        return str(emulator.nodes()[0]["state"])

    wait_until(lambda: state() == "STOPPED", "the node to stop itself", timeout=60)
    wait_until(lambda: procs() == [], "no process left on the workers")
    assert cli("delete", "nap", "--zone", Z, "--yes").code == 0


def test_idle_action_stop_is_for_single_host_nodes_and_startup_scripts_clash(cli) -> None:
    r = cli("create", "pod", "-a", "v4-16", "--zone", "us-central2-b", "--idle-timeout",
            "30m", "--idle-action", "stop")  # fmt: skip
    assert r.code == 2
    assert "the cloud stops only single-host nodes" in r.err
    r = cli("create", "mine", "-a", "v3-8", "--zone", Z, "--idle-timeout", "30m",
            "--metadata", "startup-script=echo hi")  # fmt: skip
    assert r.code == 2
    assert "cannot be combined with --metadata startup-script" in r.err
