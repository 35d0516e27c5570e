"""Multislice: `create --slices N` (one queued resource, N slice nodes), deleting them,
and the bad input around it. `run --slices` is in tests/cli/test_run_multislice.py."""

from __future__ import annotations

import json

import pytest

from tests.cli.conftest import one_line_error
from tests.cli.test_run import wait_for

ZONE = "us-central1-a"
PARENT = f"projects/tpuctl-demo/locations/{ZONE}"


def test_create_slices_makes_one_request_for_every_slice(cli, emulator) -> None:
    r = cli("create", "ms", "-a", "v3-8", "--zone", ZONE, "--slices", "2")
    assert r.code == 0, r.err
    assert "2 x v3-8 on-demand in us-central1: about $16.00/h" in r.err
    assert [line.split()[:4] for line in r.out.splitlines() if not line.startswith(" ")] == [
        ["ms-0", ZONE, "v3-8", "READY"],
        ["ms-1", ZONE, "v3-8", "READY"],
    ]
    (qr,) = emulator.queued()
    assert qr["name"] == f"{PARENT}/queuedResources/ms"
    assert qr["state"]["state"] == "ACTIVE"
    # the request shape of gcloud's --node-count 2 --node-prefix ms
    (spec,) = qr["tpu"]["nodeSpec"]
    assert spec["multisliceParams"] == {"nodeCount": 2, "nodeIdPrefix": "ms"}
    assert "nodeId" not in spec
    nodes = sorted(emulator.nodes(), key=lambda n: n["name"])
    assert [n["multisliceNode"] for n in nodes] == [True, True]
    assert {n["queuedResource"] for n in nodes} == {qr["name"]}
    assert nodes[0]["labels"]["managed-by"] == "tpuctl"

    # a slice is not deleted on its own: that would take the other slice with it
    r = cli("delete", "ms-1", "--zone", ZONE, "--yes")
    assert r.code == 2, r.err
    line = one_line_error(r)
    assert "ms-1 is slice 1 of the multislice queued resource ms (ms-0, ms-1)" in line
    assert f"tpuctl delete ms --zone {ZONE}" in r.err
    assert len(emulator.nodes()) == 2

    r = cli("delete", "ms", "--zone", ZONE, "--yes")
    assert r.code == 0, r.err
    assert "ms: queued resource deleted with its nodes ms-0, ms-1" in r.out
    assert emulator.queued() == [] and emulator.nodes() == []


def test_create_slices_json_names_every_slice(cli, emulator) -> None:
    r = cli("create", "js", "-a", "v3-8", "--zone", ZONE, "--slices", "3", "--spot", "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert (data["kind"], data["name"], data["zone"]) == ("queuedResource", "js", ZONE)
    assert [s["name"] for s in data["slices"]] == ["js-0", "js-1", "js-2"]
    assert {s["state"] for s in data["slices"]} == {"READY"}
    (qr,) = emulator.queued()
    assert "spot" in qr
    # the request's own name with a slice's: the request goes, with every slice
    assert cli("delete", "js", "js-0", "--zone", ZONE, "--yes").code == 0
    assert emulator.queued() == [] and emulator.nodes() == []


def test_one_slice_is_a_plain_request(cli, emulator) -> None:
    r = cli("create", "one", "-a", "v3-8", "--zone", ZONE, "--slices", "1", "--queued")
    assert r.code == 0, r.err
    (qr,) = emulator.queued()
    assert qr["tpu"]["nodeSpec"][0]["nodeId"] == "one"
    assert "multisliceParams" not in qr["tpu"]["nodeSpec"][0]
    assert cli("delete", "one", "--zone", ZONE, "--yes").code == 0


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--slices", "0"], "--slices must be 1 or more, not 0"),
        (["--slices", "-2"], "--slices must be 1 or more, not -2"),
        (["--slices", "2", "--preemptible"], "queued resources take --spot, not --preemptible"),
    ],
)
def test_create_slices_bad_input(cli, emulator, args, needle) -> None:
    r = cli("create", "bad", "-a", "v3-8", "--zone", ZONE, *args)
    assert r.code == 2, r.err
    assert needle in one_line_error(r, after_call=True)
    assert emulator.queued() == [] and emulator.nodes() == []


@pytest.mark.long
def test_a_multislice_ttl_takes_every_slice_and_the_request(cli, emulator) -> None:
    """The watchdog on slice 0 and 1 (one startup script, naming the request) each find
    their own slice node, and at the TTL delete the queued resource with every slice."""
    r = cli("create", "brief", "-a", "v3-8", "--zone", ZONE, "--slices", "2", "--ttl", "5s")
    assert r.code == 0, r.err
    assert len(emulator.nodes()) == 2
    wait_for(lambda: emulator.nodes() == [] and emulator.queued() == [], timeout=90)
