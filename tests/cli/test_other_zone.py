"""A node asked for in a zone it is not in: found in the others with one aggregated
list, used when it is the only one of that name, named with its zones when it is not."""

from __future__ import annotations

import shlex

from tests.cli.conftest import one_line_error

HERE = "us-central1-a"  # the zone the commands are told
THERE = "europe-west4-a"  # where the node is (v3-8 is offered in both)


def tpu_calls(emulator, since: dict[str, int]) -> dict[str, int]:  # noqa: ANN001
    """The Cloud TPU API's calls since `since` (an earlier `emulator.requests()`), not
    Compute Engine's."""
    now = emulator.requests()
    return {
        k: now[k] - since.get(k, 0)
        for k in now
        if now[k] != since.get(k, 0) and not k.split()[-1].startswith("compute.")
    }


def test_describe_finds_the_node_in_its_zone_with_one_list(cli, emulator) -> None:
    assert cli("create", "far", "-a", "v3-8", "--zone", THERE).code == 0
    try:
        before = emulator.requests()
        r = cli("describe", "far", "--zone", HERE)
        assert r.code == 0, r.err
        assert f"zone                  {THERE}\n" in r.out
        assert f"far is in zone {THERE}, not {HERE}: using it" in r.err
        assert tpu_calls(emulator, before) == {"GET get": 1, "GET list": 1}  # a miss, one list
        before = emulator.requests()
        assert cli("describe", "far", "--zone", THERE).code == 0
        assert tpu_calls(emulator, before) == {"GET get": 1}  # a hit costs no list
    finally:
        assert cli("delete", "far", "--zone", THERE, "--yes").code == 0


def test_a_name_in_no_zone_is_still_not_found(cli, emulator) -> None:
    r = cli("describe", "ghost", "--zone", HERE)
    assert r.code == 4
    assert "node 'ghost' in zone us-central1-a not found" in one_line_error(r)


def test_several_nodes_of_that_name_are_named_not_chosen(cli, emulator) -> None:
    for zone in (THERE, "us-central1-b"):
        assert cli("create", "twin", "-a", "v3-8", "--zone", zone).code == 0
    try:
        for args in (["describe", "twin"], ["stop", "twin"], ["delete", "twin", "--yes"]):
            r = cli(*args, "--zone", HERE)
            assert r.code == 4, r.err
            assert one_line_error(r) == (
                f"error: node 'twin' is not in zone {HERE}, and nodes of that name are in "
                f"zones {THERE}, us-central1-b"
            )
            assert f"hint: choose one: --zone {THERE} or --zone us-central1-b" in r.err
        assert {n["state"] for n in emulator.nodes()} == {"READY"}  # nothing was done
    finally:
        for zone in (THERE, "us-central1-b"):
            assert cli("delete", "twin", "--zone", zone, "--yes").code == 0


def test_delete_stop_start_and_ssh_act_on_the_one_match(cli, emulator) -> None:
    assert cli("create", "far", "-a", "v3-8", "--zone", THERE).code == 0
    note = f"far is in zone {THERE}, not {HERE}: using it"
    r = cli("stop", "far", "--zone", HERE)
    assert r.code == 0, r.err
    assert note in r.err and r.out.strip() == f"far  {THERE}  STOPPED"
    r = cli("start", "far", "--zone", HERE)
    assert r.code == 0, r.err
    assert note in r.err and r.out.strip() == f"far  {THERE}  READY"
    dry = cli("ssh", "far", "--zone", HERE, "--dry-run")
    assert dry.code == 0, dry.err
    assert note in dry.err and shlex.split(dry.out)[0] == "ssh"
    r = cli("delete", "far", "--zone", HERE, "--yes")
    assert r.code == 0, r.err
    assert note in r.err and r.out.strip() == "far: deleted"
    assert emulator.nodes() == []


def test_delete_missing_ok_is_a_cleanup_of_its_zone_alone(cli, emulator) -> None:
    assert cli("create", "far", "-a", "v3-8", "--zone", THERE).code == 0
    try:
        r = cli("delete", "far", "--zone", HERE, "--yes", "--missing-ok")
        assert r.code == 0, r.err
        assert f"far: not found in zone {HERE} (--missing-ok)" in r.err
        assert [n["name"].rsplit("/", 1)[1] for n in emulator.nodes()] == ["far"]
    finally:
        assert cli("delete", "far", "--zone", THERE, "--yes").code == 0
