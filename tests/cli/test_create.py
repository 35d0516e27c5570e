"""tpuctl create: validation before the call, labels, waiting, output."""

from __future__ import annotations

import json
import signal
import time

import pytest

from tests.cli.conftest import Result, one_line_error, signalled_mid_call, spawned
from tpuctl import interrupts

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
        (["create", "ok", "-a", "v3-9"], 2, "unknown accelerator type 'v3-9': did you mean v3-8?"),
        (["create", "ok", "-a", "v3-8", "--labels", "Team=x"], 2, "invalid label key 'Team'"),
        (["create", "ok", "-a", "v3-8", "--labels", "novalue"], 2, "expected KEY=VALUE"),
        (["create", "ok", "-a", "v3-8", "--spot", "--preemptible"], 2, "exclusive"),
        (["create", "ok", "-a", "v3-8", "--version", "tpu-vm-tf-9.9"], 2, "runtime version"),
        (
            ["create", "ok", "-a", "v3-8", "--zone", "mars-north1-a"],
            2,
            "unknown zone 'mars-north1-a': no Cloud TPU zone has that name",
        ),
        (["create", "ok", "--bogus-flag"], 2, "No such option"),
        (
            ["create", "ok", "-a", "tpu7x-16", "--api", "tpu"],
            2,
            "'tpu7x-16' is offered only through Compute Engine",
        ),
        (
            ["create", "ok", "-a", "v7x-8", "--api", "tpu"],
            2,
            "'tpu7x-8' is offered only through Compute Engine",
        ),
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
    r = cli("create", "ok", "-a", "v4-8x", "--zone", ZONE)
    assert r.code == 2
    assert one_line_error(r) == "error: unknown accelerator type 'v4-8x': did you mean v4-8?"
    assert "hint: v4-8 is offered in us-central2-b (--zone)" in r.err
    r = cli("create", "ok", "-a", "v4-8", "--zone", ZONE)
    assert r.code == 2
    assert "us-central2-b" in r.err  # where v4 is offered


def test_duplicate_name(cli) -> None:
    assert cli("create", "dup", "-a", "v3-8", "--zone", ZONE).code == 0
    r = cli("create", "dup", "-a", "v3-8", "--zone", ZONE)
    assert r.code == 1
    assert "already exists" in one_line_error(r)
    assert cli("delete", "dup", "--zone", ZONE, "--yes").code == 0


def test_with_no_setup_at_all_everything_missing_is_said_at_once(cli, monkeypatch) -> None:
    monkeypatch.delenv("TPUCTL_EMULATOR_HOST")
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("NO_GCE_CHECK", "true")  # no metadata server to ask, even on a VM
    r = cli("create", "x", "-a", "v3-8")
    assert r.code == 3
    assert one_line_error(r) == (
        "error: tpuctl is not set up: no project, no zone and no Google Cloud credentials"
    )
    assert (
        "hint: for Google Cloud: `gcloud auth application-default login`, then `gcloud config "
        "set project P`, then `gcloud config set compute/zone Z` (or --project P --zone Z); "
        "or try it locally with no account: `tpuctl emulator start --detach`" in r.err
    )
    r = cli("list")  # needs no zone: the project and the credentials are what it lacks
    assert one_line_error(r) == (
        "error: tpuctl is not set up: no project and no Google Cloud credentials"
    )
    r = cli("create", "x", "-a", "v3-8", "--project", "my-project", "--zone", "us-central1-a")
    assert r.code == 3  # the one thing missing, as it is found
    assert one_line_error(r, after_call=True) == "error: no Google Cloud credentials found"


def test_no_wait_returns_while_creating(cli, emulator) -> None:
    emulator.config(durations={"create": None})
    r = cli("create", "slow", "-a", "v3-8", "--zone", ZONE, "--no-wait", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["name"] == "slow"
    assert emulator.nodes()[0]["state"] == "CREATING"
    emulator.advance()
    assert cli("delete", "slow", "--zone", ZONE, "--yes").code == 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_while_waiting_names_the_node(cli, emulator, sig) -> None:
    """A real process, a real signal: the node is the user's, and the message says it
    exists and how to delete it."""
    emulator.config(durations={"create": None})
    with spawned("create", "waiting", "-a", "v3-8", "--zone", ZONE) as p:
        p.wait_for(f"creating waiting (v3-8) in {ZONE}: CREATING")
        p.proc.send_signal(sig)
    assert p.proc.returncode == 130, p.err
    assert one_line_error(Result(130, "", p.err), after_call=True) == (
        f"error: interrupted; node waiting exists in {ZONE} and may be billing"
    )
    assert f"hint: delete it with `tpuctl delete waiting --zone {ZONE} --yes`" in p.err
    emulator.advance()
    assert cli("delete", "waiting", "--zone", ZONE, "--yes").code == 0


def test_sigterm_during_the_create_call_itself_names_the_node(cli, emulator) -> None:
    p = signalled_mid_call(emulator, "POST create", "create", "midway", "-a", "v3-8", "-z", ZONE)
    assert p.proc.returncode == 130, p.err
    assert not p.said("creating midway (v3-8)")  # it never started waiting
    assert f"node midway exists in {ZONE}" in p.err
    assert [n["name"].rsplit("/", 1)[-1] for n in emulator.nodes()] == ["midway"]
    assert cli("delete", "midway", "--zone", ZONE, "--yes").code == 0


def test_create_and_run_put_back_the_signal_handlers_they_replaced(cli, emulator, tmp_path) -> None:
    def mine(signum: int, frame: object) -> None:
        raise AssertionError("not expected")

    replaced = {sig: signal.signal(sig, mine) for sig in interrupts.SIGNALS}
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\ntrue\n")
    script.chmod(0o755)
    try:
        assert cli("create", "restores", "-a", "v3-8", "--zone", ZONE).code == 0
        after_create = [signal.getsignal(sig) for sig in interrupts.SIGNALS]
        r = cli("run", str(script), "--zone", ZONE)
        after_run = [signal.getsignal(sig) for sig in interrupts.SIGNALS]
    finally:
        for sig, handler in replaced.items():
            signal.signal(sig, handler)
    assert r.code == 0, r.err
    assert after_create == after_run == [mine, mine, signal.SIG_IGN]
    assert cli("delete", "restores", "--zone", ZONE, "--yes").code == 0
