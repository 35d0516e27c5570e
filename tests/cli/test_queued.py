"""tpuctl create --queued, list and delete of queued resources, and their hygiene."""

from __future__ import annotations

import json
import re
import signal
import threading
import time

import pytest

from tests.cli.conftest import Result, one_line_error, signalled_mid_call, spawned
from tests.emulator.ssh_helpers import wait_until
from tpuctl.timestamps import parse_rfc3339

ZONE = "us-central1-a"
PARENT = f"projects/tpuctl-demo/locations/{ZONE}"


def test_create_queued_provisions_a_labelled_ready_node(cli, emulator) -> None:
    r = cli("create", "q1", "-a", "v3-8", "--zone", ZONE, "--queued", "--spot", "--ttl", "2h")
    assert r.code == 0, r.err
    assert r.out.splitlines()[0].split() == ["q1", ZONE, "v3-8", "READY"]
    (node,) = emulator.nodes()
    assert node["queuedResource"] == f"{PARENT}/queuedResources/q1"
    assert node["schedulingConfig"]["spot"] is True
    labels = node["labels"]
    assert labels["managed-by"] == "tpuctl"
    assert labels["tpuctl-owner"]
    assert int(labels["tpuctl-expires"]) - int(labels["tpuctl-created"]) == 7200
    (qr,) = emulator.queued()
    assert qr["state"]["state"] == "ACTIVE" and "spot" in qr
    r = cli("delete", "q1", "--zone", ZONE, "--yes")
    assert r.code == 0, r.err
    assert "q1: queued resource deleted with its node q1" in r.out
    assert emulator.queued() == [] and emulator.nodes() == []


def stamp(rfc3339: str) -> float:
    return parse_rfc3339(rfc3339).timestamp()


def test_valid_until_is_sent_as_the_queueing_policy(cli, emulator) -> None:
    emulator.capacity({ZONE: {"v3": 0}})
    r = cli("create", "q2", "-a", "v3-8", "--zone", ZONE, "--queued", "--valid-until", "6h",
            "--no-wait")  # fmt: skip
    assert r.code == 0, r.err
    (qr,) = emulator.queued()
    # the service answers the duration sent as the time it ends (they share a oneof)
    (until,) = qr["queueingPolicy"].values()
    assert list(qr["queueingPolicy"]) == ["validUntilTime"]
    assert stamp(until) - stamp(qr["createTime"]) == pytest.approx(21600, abs=0.001)
    assert qr["state"]["state"] == "WAITING_FOR_RESOURCES"
    listed = cli("list", "--zone", ZONE)
    assert "21600s" not in listed.out  # a time, like --valid-until-time's
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", listed.out), listed.out
    (item,) = [
        i for i in json.loads(cli("list", "--zone", ZONE, "--json").out) if i["name"] == "q2"
    ]
    assert item["validUntilTime"].endswith("Z")
    assert cli("delete", "q2", "--zone", ZONE, "--yes").code == 0
    assert emulator.queued() == []


def test_a_failed_request_is_deleted_and_its_reason_shown(cli, emulator) -> None:
    emulator.capacity({ZONE: {"v3": 0}})
    r = cli("create", "late", "-a", "v3-8", "--zone", ZONE, "--queued",
            "--valid-until-time", "2000-01-01T00:00:00Z")  # fmt: skip
    assert r.code == 6, r.err
    line = one_line_error(r, after_call=True)
    assert "queued resource late ended FAILED" in line
    assert "validity ran out" in line
    assert "tpuctl deleted the request" in line
    assert emulator.queued() == []


def test_timeout_deletes_the_request_unless_kept(cli, emulator) -> None:
    emulator.capacity({ZONE: {"v3": 0}})
    r = cli("create", "slow", "-a", "v3-8", "--zone", ZONE, "--queued", "--timeout", "1s")
    assert r.code == 6, r.err
    assert "deleted queued resource slow" in one_line_error(r, after_call=True)
    assert emulator.queued() == []
    r = cli("create", "kept", "-a", "v3-8", "--zone", ZONE, "--queued", "--timeout", "1s",
            "--keep-request")  # fmt: skip
    assert r.code == 6, r.err
    assert "stays queued (--keep-request)" in one_line_error(r, after_call=True)
    assert [q["name"].rsplit("/", 1)[-1] for q in emulator.queued()] == ["kept"]
    assert cli("delete", "kept", "--zone", ZONE, "--yes").code == 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_during_the_queued_wait_deletes_the_request(cli, emulator, sig) -> None:
    """A real process, a real signal (Ctrl-C, a scheduler's SIGTERM, a closed terminal):
    the request is gone and the message says so."""
    emulator.capacity({ZONE: {"v3": 0}})
    with spawned("create", "waiting", "-a", "v3-8", "--zone", ZONE, "--queued") as p:
        p.wait_for(f"queued waiting (v3-8) in {ZONE}: WAITING_FOR_RESOURCES")
        p.proc.send_signal(sig)
    assert p.proc.returncode == 130, p.err
    assert "stopped waiting; deleted queued resource waiting" in one_line_error(
        Result(130, "", p.err), after_call=True
    )
    assert emulator.queued() == [] and emulator.nodes() == []


def test_a_second_signal_while_the_request_is_deleted_says_what_may_be_left(cli, emulator) -> None:
    """The first Ctrl-C deletes the request; a second one, while the delete is refused and
    retried, leaves at once, and says the request may still exist, with its delete line."""
    emulator.capacity({ZONE: {"v3": 0}})
    with spawned("create", "twice", "-a", "v3-8", "--zone", ZONE, "--queued") as p:
        p.wait_for(f"queued twice (v3-8) in {ZONE}: WAITING_FOR_RESOURCES")
        # the delete call (and it alone: `?force=true`) is refused, and retried
        emulator.faults(rate=1.0, codes=[503], paths="force=true")
        try:
            p.proc.send_signal(signal.SIGINT)
            wait_until(
                lambda: any(k.startswith("DELETE") for k in emulator.requests()),
                "the delete to be tried",
                timeout=30,
            )
            p.proc.send_signal(signal.SIGINT)
        finally:
            p.proc.wait(timeout=60)
            emulator.faults()
    assert p.proc.returncode == 130, p.err
    assert "error: left at once; queued resource twice may still exist" in p.err
    assert f"tpuctl delete twice --zone {ZONE} --yes" in p.err
    assert "Traceback" not in p.err
    assert cli("delete", "twice", "--zone", ZONE, "--yes", "--missing-ok").code == 0


@pytest.mark.parametrize("keep", [False, True])
def test_sigterm_during_the_create_call_itself_leaks_no_request(cli, emulator, keep) -> None:
    """The create call is slow (every API call takes 1 s): SIGTERM while it is in flight.
    The call is not cut in half; its request is then deleted (or kept, if asked)."""
    emulator.capacity({ZONE: {"v3": 0}})
    args = ["create", "midway", "-a", "v3-8", "--zone", ZONE, "--queued"]
    p = signalled_mid_call(
        emulator, "POST queuedResources.create", *args, *(["--keep-request"] if keep else [])
    )
    assert p.proc.returncode == 130, p.err
    assert not p.said("queued midway (v3-8)")  # it never started waiting
    if keep:
        assert "stays queued (--keep-request)" in p.err
        assert [q["name"].rsplit("/", 1)[-1] for q in emulator.queued()] == ["midway"]
        assert cli("delete", "midway", "--zone", ZONE, "--yes").code == 0
    else:
        assert "deleted queued resource midway" in p.err
    assert emulator.queued() == [] and emulator.nodes() == []


def test_a_request_filled_after_the_client_left_is_found_and_deleted(cli, emulator) -> None:
    emulator.capacity({ZONE: {"v3": 0}})
    r = cli("create", "later", "-a", "v3-8", "--zone", ZONE, "--queued", "--no-wait")
    assert r.code == 0, r.err
    assert "tpuctl delete later" in r.err
    emulator.provision_queued(f"{PARENT}/queuedResources/later")  # capacity came back
    assert [n["state"] for n in emulator.nodes()] == ["READY"]
    r = cli("delete", "later", "--zone", ZONE, "--yes")
    assert r.code == 0, r.err
    assert emulator.queued() == [] and emulator.nodes() == []


def test_delete_of_a_request_without_a_node(cli, emulator) -> None:
    emulator.capacity({ZONE: {"v3": 0}})
    assert cli("create", "pending", "-a", "v3-8", "--zone", ZONE, "--queued", "--no-wait").code == 0
    r = cli("delete", "pending", "--zone", ZONE)  # not a terminal: asks for --yes
    assert r.code == 2
    assert "pass --yes to delete pending" in r.err
    r = cli("delete", "pending", "--zone", ZONE, "--yes", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out) == [
        {
            "name": "pending",
            "deleted": True,
            "message": "queued resource deleted",  # it never made its node
        }
    ]
    assert emulator.queued() == []


def test_list_shows_queued_resources_beside_nodes(cli, emulator) -> None:
    assert cli("create", "plain", "-a", "v3-8", "--zone", ZONE).code == 0
    emulator.capacity({ZONE: {"v3": 4}})
    assert cli("create", "waits", "-a", "v3-8", "--zone", ZONE, "--queued", "--spot",
               "--no-wait").code == 0  # fmt: skip
    r = cli("list", "--zone", ZONE)
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0].split()[:2] == ["NAME", "ZONE"]
    assert lines[1].split()[:4] == ["plain", ZONE, "v3-8", "READY"]
    queued_header = next(i for i, line in enumerate(lines) if line.startswith("QUEUED"))
    assert lines[queued_header + 1].split()[:5] == ["waits", ZONE, "v3-8", "spot",
                                                    "WAITING_FOR_RESOURCES"]  # fmt: skip
    r = cli("list", "--zone", ZONE, "--json")
    data = json.loads(r.out)
    assert [(d["kind"], d["name"], d["state"]) for d in data] == [
        ("node", "plain", "READY"),
        ("queuedResource", "waits", "WAITING_FOR_RESOURCES"),
    ]
    assert cli("delete", "plain", "waits", "--zone", ZONE, "--yes").code == 0
    assert emulator.queued() == [] and emulator.nodes() == []


def test_a_create_whose_answer_was_lost_adopts_the_request(cli, emulator) -> None:
    """The first create took effect but answered 503: the retry meets 409 and carries on."""
    emulator.faults(rate=1.0, codes=[503], after_rate=1.0, paths=r"queuedResources\?")
    r = cli("create", "lost", "-a", "v3-8", "--zone", ZONE, "--queued")
    emulator.faults()
    assert r.code == 0, r.err
    assert [q["name"].rsplit("/", 1)[-1] for q in emulator.queued()] == ["lost"]
    assert emulator.requests()["POST queuedResources.create"] == 2
    assert cli("delete", "lost", "--zone", ZONE, "--yes").code == 0


def test_a_suspended_request_is_deleted_and_said_so(cli, emulator) -> None:
    emulator.capacity({ZONE: {"v3": 0}})
    name = f"{PARENT}/queuedResources/gone"

    def suspend_once_queued() -> None:
        deadline = time.monotonic() + 30
        while not emulator.queued() and time.monotonic() < deadline:
            time.sleep(0.05)
        emulator.suspend_queued(name)

    helper = threading.Thread(target=suspend_once_queued)
    helper.start()
    r = cli("create", "gone", "-a", "v3-8", "--zone", ZONE, "--queued")
    helper.join()
    assert r.code == 6, r.err
    line = one_line_error(r, after_call=True)
    assert "queued resource gone ended SUSPENDED" in line
    assert emulator.queued() == []


def test_gc_collects_a_filled_request_with_its_node_and_failed_requests(cli, emulator) -> None:
    """Left behind after --no-wait: the node expires; gc takes node and request together."""
    emulator.capacity({ZONE: {"v3": 0}})
    r = cli(
        "create", "forgot", "-a", "v3-8", "--zone", ZONE, "--queued", "--no-wait", "--ttl", "1s"
    )
    assert r.code == 0, r.err
    assert cli("create", "doomed", "-a", "v3-8", "--zone", ZONE, "--queued", "--no-wait").code == 0
    emulator.provision_queued(f"{PARENT}/queuedResources/forgot")
    emulator.fail_queued(f"{PARENT}/queuedResources/doomed", "no capacity before validUntil")
    wait = time.monotonic() + 10
    while time.monotonic() < wait and "expired" not in cli("gc", "--dry-run").err:
        time.sleep(0.2)
    r = cli("gc", "--yes")
    assert r.code == 0, r.err
    assert "deleted forgot (us-central1-a, v3-8): expired" in r.out
    assert "deleted queued resource doomed (us-central1-a): failed: no capacity" in r.out
    assert emulator.queued() == [] and emulator.nodes() == []


def test_flex_start_waits_as_a_queued_request_and_ctrl_c_deletes_it(cli, emulator) -> None:
    emulator.capacity({ZONE: {"v3": 0}})
    with spawned("create", "flex", "-a", "v3-8", "--zone", ZONE, "--flex-start",
                 "--max-run-duration", "4h") as p:  # fmt: skip
        p.wait_for(f"queued flex (v3-8) in {ZONE}: WAITING_FOR_RESOURCES")
        (sent,) = emulator.bodies("queuedResources.create")
        assert sent["path"] == f"/v2alpha1/{PARENT}/queuedResources"
        assert sent["body"]["provisioningModel"] == "FLEX_START"
        assert sent["body"]["runDuration"] == {"maxRunDuration": "14400s"}
        p.proc.send_signal(signal.SIGINT)
    assert p.proc.returncode == 130, p.err
    assert "stopped waiting; deleted queued resource flex" in p.err
    assert emulator.queued() == [] and emulator.nodes() == []


def test_flex_start_gives_a_ready_node(cli, emulator) -> None:
    r = cli("create", "fx", "-a", "v3-8", "--zone", ZONE, "--flex-start",
            "--max-run-duration", "30m")  # fmt: skip
    assert r.code == 0, r.err
    assert r.out.splitlines()[0].split() == ["fx", ZONE, "v3-8", "READY"]
    (qr,) = emulator.queued()
    assert qr["state"]["state"] == "ACTIVE"
    assert cli("delete", "fx", "--zone", ZONE, "--yes").code == 0
    assert emulator.queued() == [] and emulator.nodes() == []


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--flex-start"], "--flex-start needs --max-run-duration"),
        (["--max-run-duration", "4h"], "--max-run-duration goes with --flex-start"),
        (["--flex-start", "--max-run-duration", "8d"], "at most 7d"),
        (["--flex-start", "--max-run-duration", "4h", "--spot"], "--flex-start and --spot"),
        (["--flex-start", "--max-run-duration", "soon"], "--max-run-duration"),
    ],
    ids=["no-duration", "no-flex", "too-long", "spot", "bad-duration"],
)
def test_flex_start_flags_refused_before_any_call(cli, emulator, flags, words) -> None:
    r = cli("create", "fx", "-a", "v3-8", "--zone", ZONE, *flags)
    assert r.code == 2
    assert words in one_line_error(r)
    assert emulator.bodies("queuedResources.create") == []
