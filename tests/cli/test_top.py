"""Idleness without SSH (issue 12): a node whose job ended but whose process still holds
the TPU, idle, is idle to `top`, `list` and `gc --idle` from Cloud Monitoring alone, and
collected; a busy node never is. And `tpuctl top` on and off a terminal."""

from __future__ import annotations

import json
import os
import time
from typing import Any

from tests.emulator.monitoring_helpers import on_worker  # noqa: F401 - a fixture
from tpuctl.emulator.workers import ssh as ssh_workers

Z = "us-central1-a"
PARENT = f"projects/tpuctl-demo/locations/{Z}"


def backdate_devices(emulator_server: Any, node: str, seconds: float) -> None:
    """The TensorCores were last used `seconds` ago (the device files' last write)."""
    env = emulator_server.backend.worker_env(f"{PARENT}/nodes/{node}", 0)
    then = time.time() - seconds
    for device in env["TPUCTL_TPU_DEVICES"].split(","):
        os.utime(device, (then, then))


def test_idle_holder_is_idle_everywhere_without_ssh_and_collected(
    cli: Any,
    emulator: Any,
    emulator_server: Any,
    on_worker: Any,  # noqa: F811
) -> None:
    assert cli("create", "forgotten", "-a", "v3-8", "--zone", Z).code == 0
    assert cli("create", "busy", "-a", "v3-8", "--zone", Z, "--ttl", "8h").code == 0
    # The job ended; its notebook kernel still holds the TPU and does nothing with it.
    on_worker(f"{PARENT}/nodes/forgotten")
    backdate_devices(emulator_server, "forgotten", 3600)
    trainer = on_worker(f"{PARENT}/nodes/busy")
    emulator.sample()
    trainer.step("80")  # a training step keeping the TensorCores 80% busy
    emulator.sample()
    ssh_before = ssh_workers.CONNECTIONS[0]

    r = cli("top", "--json")
    assert r.code == 0, r.err
    rows = {row["name"]: row for row in json.loads(r.out)}
    assert list(rows) == ["busy", "forgotten"]  # sorted by cost: same price, then stable
    assert rows["forgotten"]["idleSeconds"] >= 3600
    assert rows["forgotten"]["utilization"] == 0.0
    assert rows["busy"]["idleSeconds"] == 0
    assert rows["busy"]["utilization"] == 40.0  # the minute's mean: 0 then 80
    assert rows["busy"]["ttlLeftSeconds"] > 7 * 3600
    assert rows["busy"]["owner"] and rows["busy"]["hourlyUsd"] > 0

    r = cli("top")  # no terminal: one snapshot
    assert r.code == 0, r.err
    header, *lines = r.out.strip().splitlines()
    assert header.split()[:9] == [
        "NAME", "ZONE", "ACCELERATOR", "STATE", "AGE", "$/H", "COST", "UTIL", "LAST",
    ]  # fmt: skip
    forgotten = next(line for line in lines if line.startswith("forgotten"))
    assert " 0% " in forgotten and " 1h " in forgotten

    r = cli("list", "--zone", Z)
    assert r.code == 0, r.err
    listed = {line.split()[0]: line.split() for line in r.out.strip().splitlines()[1:]}
    assert listed["forgotten"][-3:] == ["0%", "1h", "-"]  # UTIL, IDLE, EXPIRES
    assert listed["busy"][-3:-1] == ["40%", "0s"]

    r = cli("gc", "--yes", "--idle", "30m")
    assert r.code == 0, r.err
    assert (
        "deleted forgotten (us-central1-a, v3-8): idle (limit 30m): TensorCores idle for 1h "
        "on its 1 worker(s) (evidence: metrics)" in r.out
    )
    assert "keep busy (us-central1-a): TensorCores idle for 0s at the last sample (" in r.err
    assert [n["name"].rsplit("/", 1)[1] for n in emulator.nodes()] == ["busy"]
    assert ssh_workers.CONNECTIONS[0] == ssh_before  # no SSH connection at all
    assert "POST getGuestAttributes" not in emulator.requests()  # nor any step toward one
    log = os.path.join(os.environ["XDG_STATE_HOME"], "tpuctl", "gc.log")
    with open(log) as f:
        entry = json.loads(f.read().splitlines()[-1])
    assert (entry["node"], entry["evidence"]) == ("forgotten", "metrics")

    assert cli("delete", "busy", "--zone", Z, "--yes").code == 0


def test_done_when_a_finished_jobs_idle_holder_is_idle_everywhere_without_ssh(
    cli: Any,
    emulator: Any,
    emulator_server: Any,
    on_worker: Any,  # noqa: F811
    tmp_path: Any,
) -> None:
    """Issue 12's "Done when", in one go: a node whose job ended but whose holder process
    is idle is reported idle by `top` (on and off a terminal), `list` and `gc --idle`
    without any SSH connection, and collected; a busy node is never collected."""
    (tmp_path / "job.py").write_text("print('trained')\n")
    r = cli("run", str(tmp_path / "job.py"), "-a", "v3-8", "--zone", Z, "--keep", "--json")
    assert r.code == 0, r.err
    job = json.loads(r.out)["job"]
    node = f"tpuctl-{job}"  # the job's node, kept after the job ended
    assert cli("create", "busy", "-a", "v3-8", "--zone", Z).code == 0
    on_worker(f"{PARENT}/nodes/{node}")  # e.g. a notebook kernel: holds the TPU, idle
    backdate_devices(emulator_server, node, 3600)
    trainer = on_worker(f"{PARENT}/nodes/busy")
    trainer.step("90")
    emulator.sample()
    ssh_before = ssh_workers.CONNECTIONS[0]

    rows = {x["name"]: x for x in json.loads(cli("top", "--json").out)}
    assert rows[node]["idleSeconds"] >= 3600 and rows[node]["utilization"] == 0.0
    assert (rows[node]["job"], rows[node]["jobState"]) == (job, "SUCCEEDED")
    assert rows["busy"]["idleSeconds"] == 0 and rows["busy"]["jobState"] is None
    r = cli("top")  # off a terminal: one table
    assert r.code == 0, r.err
    cells = next(x for x in r.out.splitlines() if x.startswith(node)).split()
    at = cells.index(job)
    assert cells[at - 1 : at + 2] == ["1h", job, "SUCCEEDED"]  # IDLE, JOB, JOB STATE
    listed = {x.split()[0]: x.split() for x in cli("list", "--zone", Z).out.splitlines()[1:]}
    assert listed[node][-3:-1] == ["0%", "1h"] and listed["busy"][-2] == "0s"  # UTIL, IDLE

    r = cli("gc", "--yes", "--idle", "30m")
    assert r.code == 0, r.err
    assert f"deleted {node} (us-central1-a, v3-8): idle (limit 30m): TensorCores idle" in r.out
    assert "(evidence: metrics)" in r.out
    assert "keep busy (us-central1-a): TensorCores idle for 0s at the last sample (" in r.err
    assert [n["name"].rsplit("/", 1)[1] for n in emulator.nodes()] == ["busy"]
    assert ssh_workers.CONNECTIONS[0] == ssh_before  # not one SSH connection since the job
    assert cli("delete", "busy", "--zone", Z, "--yes").code == 0


def test_without_fresh_metrics_gc_falls_back_on_the_probe(cli: Any, emulator: Any) -> None:
    assert cli("create", "quiet", "-a", "v3-8", "--zone", Z).code == 0
    from tests.cli.test_gc import set_label

    set_label(emulator, "quiet", "tpuctl-last-active", str(int(time.time()) - 3600))
    r = cli("gc", "--yes", "--idle", "30m")  # never sampled: no metrics
    assert r.code == 0, r.err
    assert "deleted quiet (us-central1-a, v3-8): idle for 1h (limit 30m): no job" in r.out
    assert "(evidence: probe)" in r.out


def test_top_on_a_terminal_shows_rows_and_quits_on_q(
    cli: Any, emulator: Any, tmp_path: Any
) -> None:
    import sys

    import pexpect

    from tests.cli.test_gc import set_label

    assert cli("create", "tj", "-a", "v3-8", "--zone", Z).code == 0
    set_label(emulator, "tj", "tpuctl-job", "20261130-000000-abc123")  # no such job: "?"
    env = {k: v for k, v in os.environ.items()}
    env["COLUMNS"], env["LINES"] = "200", "40"
    child = pexpect.spawn(
        sys.executable, ["-m", "tpuctl", "top", "--interval", "0.5"], env=env,
        dimensions=(40, 200), timeout=30, encoding="utf-8",
    )  # fmt: skip
    try:
        child.expect("tpuctl top: 1 node")
        child.expect(r"tj .*20261130-000000-abc123 +\? ")
        child.send("u")
        child.expect("sorted by util")
        child.send("q")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0
    assert cli("delete", "tj", "--zone", Z, "--yes").code == 0


def test_top_at_80_columns_says_what_it_hid_and_how_to_quit(cli: Any, emulator: Any) -> None:
    """A narrow terminal: the columns that did not fit are named in the frame, a column
    with nothing in it (no samples yet: no sparkline) is not kept, and the keys line, q
    included, is shown whole."""
    import io
    import re
    import sys

    import pexpect

    assert cli("create", "tj", "-a", "v3-8", "--zone", Z).code == 0  # never sampled
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "80", "LINES": "40"}
    child = pexpect.spawn(
        sys.executable, ["-m", "tpuctl", "top", "--interval", "30"], env=env,
        dimensions=(40, 80), timeout=30, encoding="utf-8",
    )  # fmt: skip
    frame = io.StringIO()
    child.logfile_read = frame
    try:
        child.expect("tpuctl top: 1 node")
        child.expect("shows all")  # the frame's last line
        child.send("q")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0
    drawn = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", frame.getvalue())
    first = "tpuctl top: " + drawn.split("tpuctl top: ")[1]  # the first frame
    lines = [ln.strip() for ln in first.splitlines()]
    text = " ".join(ln for ln in lines if ln)
    assert "keys: c u i a n z sort (cost util idle age name zone), q quits" in text
    (header,) = [ln for ln in lines if ln.startswith("NAME ")]
    assert "LAST 10M" not in header and "UTIL" in header  # no sparkline yet: no column
    said = re.search(r"hidden: (.*?); a wider terminal or --json shows all", text)
    assert said, text
    hidden = said.group(1).split(", ")
    assert {"COST", "EXPIRES", "OWNER", "HBM", "DUTY"} <= set(hidden)
    assert not set(hidden) & set(header.split())  # what it shows, it does not call hidden
    assert "LAST 10M" not in hidden  # nothing to show is not hidden
    assert cli("delete", "tj", "--zone", Z, "--yes").code == 0
