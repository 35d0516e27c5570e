"""Waiting for capacity, seen: the progress line of a queued request says what ends
the wait (its --valid-until, or tpuctl's --timeout) and what comes next; a request
whose validity runs out while it waits is no capacity in that zone, and the next zone
given is tried, as a zone with none at the create is."""

from __future__ import annotations

import re

from tests.cli.conftest import one_line_error

FIRST, SECOND = "us-central1-a", "us-central1-b"


def test_a_request_that_expires_waiting_moves_to_the_next_zone(cli, emulator) -> None:
    emulator.capacity({FIRST: {"v3": 0}})  # none here; us-central1-b has some
    r = cli("create", "qz", "-a", "v3-8", "--zone", f"{FIRST},{SECOND}", "--queued",
            "--valid-until", "2s")  # fmt: skip
    assert r.code == 0, r.err
    waiting = [ln for ln in r.err.splitlines() if f"in {FIRST}: WAITING_FOR_RESOURCES" in ln]
    assert waiting, r.err
    assert re.search(
        r"; the request expires at \d\d:\d\d UTC \(--valid-until\), then " + SECOND, waiting[0]
    ), waiting[0]
    assert f"zone {FIRST} skipped: queued resource qz ended FAILED while waiting" in r.err
    (node,) = emulator.nodes()
    assert f"/locations/{SECOND}/" in node["name"]
    assert [q["name"].rsplit("/", 1)[-1] for q in emulator.queued()] == ["qz"]  # B's only
    assert cli("delete", "qz", "--zone", SECOND, "--yes").code == 0


def test_the_last_zones_wait_says_tpuctl_gives_up(cli, emulator) -> None:
    emulator.capacity({FIRST: {"v3": 0}})
    r = cli("create", "qy", "-a", "v3-8", "--zone", FIRST, "--queued", "--timeout", "1s")
    assert r.code != 0
    assert re.search(r"; tpuctl stops waiting at \d\d:\d\d UTC \(--timeout\)", r.err), r.err
    assert "gave up after 1s" in one_line_error(r, after_call=True)
    assert emulator.queued() == []
