"""The receipt at the end of `run`: its parts add up to the node's life as the run saw it,
and `tpuctl jobs JOB` shows the same receipt from another machine (another HOME)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.cli.test_run import project

__all__ = ["project"]  # the fixture, shared


def test_the_receipt_adds_up_and_another_home_sees_it(
    cli, emulator, project, tmp_path: Path, monkeypatch
) -> None:
    began = time.time()
    r = cli("run", str(project / "job.py"), "--json")
    took = time.time() - began
    assert r.code == 0, r.err
    result = json.loads(r.out)
    got = result["receipt"]
    total = sum(got["seconds"].values())
    assert 0 < total <= took + 7 * 0.05  # every phase is inside the run (kept in tenths)
    assert took - total < 5  # ...and together they are all of it but its last steps
    assert got["seconds"]["script"] > 0 and got["seconds"]["teardown"] >= 0
    assert got["hourlyUsd"] == 8.0  # a v3-8 at list price (tpuctl's table)
    assert f"job {result['job']}: receipt: " in r.err and "at list price (v3-8)" in r.err

    other = tmp_path / "other-home"  # another laptop: no state of this run
    for sub in ("home", "config", "state"):
        (other / sub).mkdir(parents=True)
    monkeypatch.setenv("HOME", str(other / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(other / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(other / "state"))
    shown = cli("jobs", result["job"], "--json")
    assert shown.code == 0, shown.err
    assert json.loads(shown.out)["receipt"] == got
    table = cli("jobs", result["job"])
    assert "receipt: " in table.out and "at list price (v3-8)" in table.out
    assert emulator.nodes() == []
