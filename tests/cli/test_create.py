"""tpuctl create: validation before the call, labels, waiting, output."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.cli.conftest import one_line_error

ZONE = "us-central1-a"


def test_create_v3_8_labels_and_waits_ready(cli, emulator) -> None:
    r = cli("create", "t1", "--accelerator", "v3-8", "--zone", ZONE, "--labels", "team=ml")
    assert r.code == 0, r.err
    assert r.out.splitlines()[0].split() == ["t1", ZONE, "v3-8", "READY"]
    (node,) = emulator.nodes()
    labels = node["labels"]
    assert labels["managed-by"] == "tpuctl"
    assert labels["team"] == "ml"
    assert labels["tpuctl-owner"]
    assert abs(int(labels["tpuctl-created"]) - time.time()) < 60
    assert node["runtimeVersion"] == "tpu-ubuntu2204-base"
    assert node["networkConfig"]["enableExternalIps"] is True
    assert cli("delete", "t1", "--zone", ZONE, "--yes").code == 0


def test_create_json_multi_host(cli, emulator) -> None:
    r = cli("create", "pod", "-a", "v4-32", "--zone", "us-central2-b", "--spot", "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["state"] == "READY"
    assert data["scheduling"] == "spot"
    ips = [w["internalIp"] for w in data["workers"]]
    assert len(ips) == 4 and len(set(ips)) == 4
    assert all(ip.startswith("127.") for ip in ips)
    assert cli("delete", "pod", "--zone", "us-central2-b", "--yes").code == 0


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["create", "Bad_Name", "-a", "v3-8"], 2, "invalid node name 'Bad_Name'"),
        (["create", "ok", "-a", "v3-9"], 2, "accelerator type 'v3-9' is not offered"),
        (["create", "ok", "-a", "v3-8", "--labels", "Team=x"], 2, "invalid label Team=x"),
        (["create", "ok", "-a", "v3-8", "--labels", "novalue"], 2, "expected KEY=VALUE"),
        (["create", "ok", "-a", "v3-8", "--spot", "--preemptible"], 2, "exclusive"),
        (["create", "ok", "-a", "v3-8", "--version", "tpu-vm-tf-9.9"], 2, "runtime version"),
        (["create", "ok", "-a", "v3-8", "--zone", "mars-north1-a"], 6, "locations/mars-north1-a"),
        (["create", "ok", "--bogus-flag"], 2, "No such option"),
    ],
)
def test_bad_input_is_one_line(cli, emulator, args, code, needle) -> None:
    if "--zone" not in args:
        args = [*args, "--zone", ZONE]
    r = cli(*args)
    assert r.code == code, r.err
    assert needle in one_line_error(r)
    assert emulator.nodes() == []


def test_unknown_accelerator_suggests(cli) -> None:
    r = cli("create", "ok", "-a", "v3-9", "--zone", ZONE)
    assert "did you mean v3-8" in r.err
    r = cli("create", "ok", "-a", "v4-8", "--zone", ZONE)
    assert r.code == 2
    assert "us-central2-b" in r.err  # where v4 is offered


def test_duplicate_name(cli) -> None:
    assert cli("create", "dup", "-a", "v3-8", "--zone", ZONE).code == 0
    r = cli("create", "dup", "-a", "v3-8", "--zone", ZONE)
    assert r.code == 1
    assert "already exists" in one_line_error(r)
    assert cli("delete", "dup", "--zone", ZONE, "--yes").code == 0


def test_missing_project_without_emulator(cli, monkeypatch) -> None:
    monkeypatch.delenv("TPUCTL_EMULATOR_HOST")
    r = cli("create", "x", "-a", "v3-8")
    assert r.code == 3
    assert "no project set; looked at --project" in one_line_error(r)


def test_no_wait_returns_while_creating(cli, emulator) -> None:
    emulator.config(durations={"create": None})
    r = cli("create", "slow", "-a", "v3-8", "--zone", ZONE, "--no-wait", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["name"] == "slow"
    assert emulator.nodes()[0]["state"] == "CREATING"
    emulator.advance()
    assert cli("delete", "slow", "--zone", ZONE, "--yes").code == 0


def test_ctrl_c_while_waiting_names_the_node(cli, emulator) -> None:
    """A real process, a real SIGINT: the message says the node exists and how to delete it."""
    emulator.config(durations={"create": None})
    proc = subprocess.Popen(
        [sys.executable, "-m", "tpuctl", "create", "waiting", "-a", "v3-8", "--zone", ZONE],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    try:
        deadline = time.monotonic() + 30
        while not emulator.nodes() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # let it enter the wait loop
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "node waiting exists in us-central1-a" in err
    assert f"tpuctl delete waiting --zone {ZONE} --yes" in err
    assert "Traceback" not in err
    emulator.advance()
    assert cli("delete", "waiting", "--zone", ZONE, "--yes").code == 0
