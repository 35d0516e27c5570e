"""tpuctl with nodes in the states and health the emulator reaches only through its control
plane (REPAIRING, TERMINATED, HIDDEN, UNKNOWN; TIMEOUT, UNHEALTHY_*; symptoms) and with
queued resources SUSPENDING or SUSPENDED: list, describe, ssh and gc each do something
sensible."""

from __future__ import annotations

import json

import pytest

from tests.cli.conftest import one_line_error

Z = "us-central1-a"
PARENT = f"projects/tpuctl-demo/locations/{Z}"
# gcloud's words (command_lib/compute/tpus/tpu_vm/exceptions.py, TPUInUnusableState and
# TPUInUnusableTerminalState), which `tpuctl ssh` follows
UNUSABLE = "error: TPU n has state {}, so it cannot be currently connected to"
TERMINAL = "error: TPU n has terminal state {}, so it cannot be used anymore"


@pytest.fixture
def node(cli, emulator):  # noqa: ANN001, ANN201
    assert cli("create", "n", "-a", "v3-8", "--zone", Z, "--ttl", "8h").code == 0
    yield f"{PARENT}/nodes/n"
    emulator.set_node_state(f"{PARENT}/nodes/n", state="READY")  # deletable from any state
    assert cli("delete", "n", "--zone", Z, "--yes").code == 0


@pytest.mark.parametrize(
    ("state", "refusal", "gc_deletes"),
    [
        ("REPAIRING", UNUSABLE, False),
        ("HIDDEN", UNUSABLE, False),
        ("UNKNOWN", UNUSABLE, False),
        ("TERMINATED", TERMINAL, True),
    ],
)
def test_states_the_emulator_never_reaches_alone(
    cli, emulator, node: str, state: str, refusal: str, gc_deletes: bool
) -> None:
    emulator.set_node_state(node, state=state, health="")
    r = cli("list", "--zone", Z)
    assert r.code == 0, r.err
    row = r.out.strip().splitlines()[1].split()
    assert row[:4] == ["n", Z, "v3-8", state]
    listed = json.loads(cli("list", "--zone", Z, "--json").out)
    assert [(n["state"], n["health"]) for n in listed] == [(state, "")]
    r = cli("describe", "n", "--zone", Z)
    assert r.code == 0 and state in r.out

    r = cli("ssh", "n", "--zone", Z, "--command", "true")
    assert r.code == 2
    assert one_line_error(r) == refusal.format(state)

    r = cli("gc", "--yes")
    assert r.code == 0, r.err
    gone = [n for n in emulator.nodes() if n["name"] == node] == []
    assert gone == gc_deletes
    if gc_deletes:
        assert "deleted n (us-central1-a, v3-8): terminated: holds quota until deleted" in r.out
        assert cli("create", "n", "-a", "v3-8", "--zone", Z).code == 0  # for the fixture


@pytest.mark.parametrize(
    "health", ["HEALTHY", "TIMEOUT", "UNHEALTHY_TENSORFLOW", "UNHEALTHY_MAINTENANCE"]
)
def test_health_values_and_symptoms_are_shown_and_ssh_still_works(
    cli, emulator, node: str, health: str
) -> None:
    symptom = {"symptomType": "HBM_OUT_OF_MEMORY", "details": "hbm full", "workerId": "0"}
    emulator.set_node_state(node, health=health, healthDescription="seen by the test",
                            symptoms=[symptom])  # fmt: skip
    r = cli("list", "--zone", Z)
    assert r.out.strip().splitlines()[1].split()[3:5] == ["READY", health]
    r = cli("describe", "n", "--zone", Z)
    assert r.code == 0
    assert f"READY ({health})" in r.out and "seen by the test" in r.out
    raw = json.loads(cli("describe", "n", "--zone", Z, "--json").out)
    assert raw["health"] == health
    # READY: the workers serve SSH whatever the health (gcloud only warns on maintenance)
    r = cli("ssh", "n", "--zone", Z, "--command", "echo up")
    assert (r.code, r.out) == (0, "up\n"), r.err
    r = cli("gc", "--yes")
    assert r.code == 0 and [n["name"] for n in emulator.nodes()] == [node]


@pytest.mark.parametrize("held", [True, False])
def test_suspending_and_suspended_requests(cli, emulator, held: bool) -> None:
    r = cli("create", "q", "-a", "v3-8", "--zone", Z, "--queued", "--spot")
    assert r.code == 0, r.err
    name = f"{PARENT}/queuedResources/q"
    emulator.suspend_queued(name, held=held)
    state = "SUSPENDING" if held else "SUSPENDED"
    assert [q["state"]["state"] for q in emulator.queued()] == [state]
    r = cli("list", "--zone", Z)
    assert r.code == 0 and state in r.out
    r = cli("gc", "--yes")
    assert r.code == 0, r.err
    left = [q["state"]["state"] for q in emulator.queued()]
    # SUSPENDED can never give a node again: gc deletes it, with whatever node is left;
    # SUSPENDING is on its way there: left alone
    assert left == ([state] if held else [])
    if held:
        r = cli("delete", "q", "--zone", Z, "--yes")
        assert r.code == 0, r.err
    else:
        assert "deleted queued resource q" in r.out
    assert emulator.queued() == [] and emulator.nodes() == []


def test_ssh_to_a_node_just_ready_waits_for_its_host_keys(cli, emulator) -> None:
    """The guest publishes its host keys a little after READY (here 2 s): tpuctl waits
    for them instead of failing or trusting whatever answers."""
    emulator.durations(hostkeys=2.0)
    assert cli("create", "fresh", "-a", "v3-8", "--zone", Z).code == 0
    attrs = emulator.tpu_client().get_guest_attributes(
        request={"name": f"{PARENT}/nodes/fresh", "query_path": "hostkeys/"}
    )
    assert not attrs.guest_attributes[0].query_value.items  # not yet published
    r = cli("ssh", "fresh", "--zone", Z, "--command", "echo up")
    assert (r.code, r.out) == (0, "up\n"), r.err
    assert cli("delete", "fresh", "--zone", Z, "--yes").code == 0
