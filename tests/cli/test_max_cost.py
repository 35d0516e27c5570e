"""A node's TTL and its spending cap (--max-cost) hold on the node itself: its watchdog
deletes it at its `tpuctl-expires` label, busy or not, with no gc; the cap is announced
at create, shown by list, and named in the end line of the job it ended."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.cli.conftest import one_line_error
from tests.cli.test_gc import PARENT, Z, names, set_label
from tests.cli.test_idle_watchdog import FAST, HOLD, labels
from tests.cli.test_run import project, wait_for
from tests.emulator.ssh_helpers import wait_until

__all__ = ["project"]  # the fixture, shared


def _watchdog_log(emulator_server, node: str) -> str:  # noqa: ANN001
    home = Path(emulator_server.backend.worker_env(f"{PARENT}/nodes/{node}", 0)["HOME"])
    try:
        return (home / ".tpuctl" / "idle-watchdog.log").read_text()
    except OSError:
        return ""


def test_max_cost_is_announced_labelled_and_listed(cli, emulator) -> None:
    # v3-8: 4 chips at $2.00 an hour each, $8.00/h: $50 last 6h15m.
    r = cli("create", "capped", "-a", "v3-8", "--zone", Z, "--max-cost", "50")
    assert r.code == 0, r.err
    # the clock, with its date when that is not today's (after 17:45 UTC it is tomorrow)
    said = re.search(r"max cost \$50\.00 ≈ 6h15m at \$8\.00/h: the node deletes itself at "
                     r"((?:\d{4}-\d\d-\d\d )?\d\d:\d\d) UTC", r.err)  # fmt: skip
    assert said, r.err
    got = labels(emulator, "capped")
    created = int(got["tpuctl-created"])
    assert got["tpuctl-max-cost"] == "5000"
    assert int(got["tpuctl-cost-deadline"]) == created + 6 * 3600 + 15 * 60
    assert got["tpuctl-expires"] == got["tpuctl-cost-deadline"]  # no --ttl: the cap
    expires = time.gmtime(int(got["tpuctl-expires"]))
    shown = "%H:%M" if expires[:3] == time.gmtime()[:3] else "%Y-%m-%d %H:%M"
    assert said.group(1) == time.strftime(shown, expires)
    r = cli("list", "--zone", Z)
    assert r.code == 0, r.err
    assert "$50 cap" in r.out and "6h1" in r.out
    assert cli("delete", "capped", "--zone", Z, "--yes").code == 0


def test_the_earlier_of_ttl_and_max_cost_wins_and_spot_is_priced_as_spot(cli, emulator) -> None:
    r = cli("create", "both", "-a", "v3-8", "--zone", Z, "--spot", "--max-cost", "10",
            "--ttl", "1h")  # fmt: skip
    assert r.code == 0, r.err
    # spot v3: $0.51 a chip-hour, $2.04/h: $10 last 4h54m, so the TTL ends it first.
    assert "max cost $10.00 ≈ 4h54m at $2.04/h" in r.err
    assert "(its --ttl ends before its max cost is reached)" in r.err
    got = labels(emulator, "both")
    assert int(got["tpuctl-expires"]) == int(got["tpuctl-created"]) + 3600
    assert cli("delete", "both", "--zone", Z, "--yes").code == 0


@pytest.mark.parametrize("value", ["abc", "0", "-5", "inf", "nan", "$", "2000000"])
@pytest.mark.parametrize("verb", ["create", "run"])
def test_a_bad_max_cost_is_a_usage_error(cli, emulator, project, verb: str, value: str) -> None:
    args = ["create", "bad", "-a", "v3-8"] if verb == "create" else ["run", str(project / "job.py")]
    r = cli(*args, "--max-cost", value, "--no-check" if verb == "run" else "--zone", *(
        [] if verb == "run" else [Z]))  # fmt: skip
    assert r.code == 2, r.err
    assert f"invalid --max-cost {value!r}: a number of US dollars" in one_line_error(r)
    assert emulator.nodes() == []


def test_a_busy_node_deletes_itself_at_its_ttl_with_no_gc(emulator_server, cli, emulator) -> None:
    r = cli("create", "busy", "-a", "v3-8", "--zone", Z, "--ttl", "1h", *FAST)
    assert r.code == 0, r.err
    assert cli("ssh", "busy", "--zone", Z, "--command", HOLD).code == 0  # holds the TPU
    wait_until(lambda: "busy: " in _watchdog_log(emulator_server, "busy"), "the watchdog")
    set_label(emulator, "busy", "tpuctl-expires", str(int(time.time()) - 1))
    try:
        wait_until(lambda: names(emulator) == [], "the node to delete itself", timeout=60)
    except AssertionError:  # what the watchdog saw says why
        log = _watchdog_log(emulator_server, "busy")
        raise AssertionError(f"busy did not delete itself; its watchdog said:\n{log}") from None


@pytest.mark.long  # the job runs until its 22 s are spent
def test_a_job_ended_by_its_max_cost_says_so(cli, emulator, project) -> None:
    # $0.05 at $8.00/h: 22 s, long enough for the job to start, far shorter than its nap.
    r = cli("run", str(project / "job.py"), "--max-cost", "0.05", "--env", "NAP=300")
    assert r.code == 1, r.err
    assert "max cost $0.050 ≈ 22s at $8.00/h: the node deletes itself at" in r.err
    assert "reached its max cost ($0.05 at list price, after 22s) and deleted itself" in r.err
    assert "recreating" not in r.err
    wait_for(lambda: emulator.nodes() == [])


def test_a_cap_is_set_when_a_node_is_made_not_on_an_existing_one(cli, emulator, project) -> None:
    assert cli("create", "mine", "-a", "v3-8", "--zone", Z).code == 0
    r = cli("run", str(project / "job.py"), "--node", "mine", "--max-cost", "5", "--zone", Z)
    assert r.code == 2, r.err
    assert "--max-cost caps a node the job creates, and node mine exists" in one_line_error(r)
    assert "tpuctl create --max-cost" in r.err
    assert cli("delete", "mine", "--zone", Z, "--yes").code == 0
