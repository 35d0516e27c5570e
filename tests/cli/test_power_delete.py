"""tpuctl stop / start / delete."""

from __future__ import annotations

import json

from tests.cli.conftest import one_line_error

Z = "us-central1-a"


def test_stop_start_single_host(cli, emulator) -> None:
    assert cli("create", "s1", "-a", "v3-8", "--zone", Z).code == 0
    r = cli("stop", "s1", "--zone", Z)
    assert r.code == 0, r.err
    assert "STOPPED" in r.out
    assert emulator.nodes()[0]["state"] == "STOPPED"
    r = cli("start", "s1", "--zone", Z, "--json")
    assert r.code == 0
    assert json.loads(r.out)["state"] == "READY"
    assert cli("delete", "s1", "--zone", Z, "--yes").code == 0


def test_stop_multi_host_is_refused_clearly(cli, emulator) -> None:
    assert cli("create", "pod", "-a", "v3-32", "--zone", Z).code == 0
    r = cli("stop", "pod", "--zone", Z)
    assert r.code == 2
    assert "multi-host slice (4 workers)" in one_line_error(r)
    assert emulator.nodes()[0]["state"] == "READY"
    assert cli("delete", "pod", "--zone", Z, "--yes").code == 0


def test_start_a_creating_node_is_refused(cli, emulator) -> None:
    emulator.config(durations={"create": None})
    assert cli("create", "c1", "-a", "v3-8", "--zone", Z, "--no-wait").code == 0
    r = cli("start", "c1", "--zone", Z)
    assert r.code == 2
    assert "cannot start c1: it is CREATING" in one_line_error(r)
    emulator.advance()
    assert cli("delete", "c1", "--zone", Z, "--yes").code == 0


def test_delete_several_and_missing(cli, emulator) -> None:
    for name in ("x1", "x2", "x3"):
        assert cli("create", name, "-a", "v3-8", "--zone", Z).code == 0
    r = cli("delete", "x1", "x2", "nope", "--zone", Z, "--yes")
    assert r.code == 4
    assert "nope: not found" in r.err
    assert "x1: deleted" in r.out and "x2: deleted" in r.out
    assert [n["name"].rsplit("/", 1)[1] for n in emulator.nodes()] == ["x3"]
    r = cli("delete", "x3", "nope", "--zone", Z, "--yes", "--missing-ok", "--json")
    assert r.code == 0
    assert {d["name"]: d["deleted"] for d in json.loads(r.out)} == {"x3": True, "nope": False}


def test_delete_asks_on_a_terminal_and_refuses_without_one(cli, emulator) -> None:
    assert cli("create", "keepme", "-a", "v3-8", "--zone", Z).code == 0
    r = cli("delete", "keepme", "--zone", Z)  # no terminal, no --yes
    assert r.code == 2
    assert "refusing to delete without confirmation" in one_line_error(r)
    r = cli("delete", "keepme", "--zone", Z, tty=True, stdin="n\n")
    assert r.code == 1
    assert "nothing deleted" in r.err
    assert len(emulator.nodes()) == 1
    r = cli("delete", "keepme", "--zone", Z, tty=True, stdin="y\n")
    assert r.code == 0, r.err
    assert emulator.nodes() == []


def test_delete_no_wait(cli, emulator) -> None:
    emulator.config(durations={"delete": None})
    assert cli("create", "nw", "-a", "v3-8", "--zone", Z).code == 0
    r = cli("delete", "nw", "--zone", Z, "--yes", "--no-wait")
    assert r.code == 0
    assert "deletion started" in r.out
    assert emulator.nodes()[0]["state"] == "DELETING"
    emulator.advance()
    assert emulator.nodes() == []


def test_emulator_preempt_command(cli, emulator) -> None:
    assert cli("create", "sp", "-a", "v3-8", "--zone", Z, "--spot").code == 0
    r = cli("emulator", "preempt", "sp", "--zone", Z)
    assert r.code == 0, r.err
    assert emulator.nodes()[0]["state"] == "PREEMPTED"
    r = cli("emulator", "preempt", "sp", "--zone", Z)  # not READY any more
    assert r.code == 1 and "cannot preempt sp" in r.err
    assert cli("delete", "sp", "--zone", Z, "--yes").code == 0


def test_emulator_preempt_gives_notice_first(cli, emulator) -> None:
    assert cli("create", "sp", "-a", "v3-8", "--zone", Z, "--spot").code == 0
    r = cli("emulator", "preempt", "sp", "--zone", Z, "--notice", "600")
    assert r.code == 0, r.err
    assert "preempting sp in us-central1-a: its notice has begun" in r.err
    assert emulator.nodes()[0]["state"] == "READY"
    bad = cli("emulator", "preempt", "sp", "--zone", Z, "--notice", "-1")
    assert bad.code == 2 and "--notice" in bad.err
    assert cli("delete", "sp", "--zone", Z, "--yes").code == 0
