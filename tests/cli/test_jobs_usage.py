"""A job's TensorCore use over its life (issue 12): the end of `tpuctl run` and `tpuctl
jobs` show the mean utilisation and idle share from Cloud Monitoring, flag an input-bound
job, batch many jobs into one list call, and degrade to a note (not yet ingested, the API
off); a torn-down job's node is gone but its series are not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# A step that keeps the TensorCores 35% busy, every 50 ms, for BUSY seconds: input-bound.
STEPS = """\
import os, time
devs = [open(p, "a") for p in os.environ["TPUCTL_TPU_DEVICES"].split(",")]
end = time.time() + float(os.environ.get("BUSY", "0"))
while time.time() < end:
    for d in devs:
        d.write("35\\n"); d.flush()
    time.sleep(0.05)
print("done")
"""


def test_run_and_jobs_show_tensorcore_use_and_degrade_cleanly(
    cli: Any, emulator: Any, tmp_path: Path
) -> None:
    (tmp_path / "steps.py").write_text(STEPS)
    emulator.monitoring(sample_period=0.2, ingestion_delay=0)  # sampled all along
    r = cli("run", str(tmp_path / "steps.py"), "--env", "BUSY=3")
    assert r.code == 0, r.err
    line = next(x for x in r.err.splitlines() if "TensorCores" in x)
    assert "% busy on average, idle in " in line and "looks input-bound (below 50%)" in line
    idle = cli("run", str(tmp_path / "steps.py"), "--json")  # holds nothing, uses nothing
    assert idle.code == 0, idle.err
    quiet = json.loads(idle.out)
    assert quiet["utilization"] in (0.0, None)  # too short to be sampled, or sampled idle
    assert emulator.nodes() == []  # both nodes torn down: their series stay in Monitoring
    emulator.monitoring(sample_period=None)

    before = emulator.requests()
    rows = {x["name"]: x for x in json.loads(cli("jobs", "--json").out)}
    after = emulator.requests()
    calls = sum(after.get(k, 0) - before.get(k, 0) for k in after if "timeSeries.list" in k)
    assert calls == 1  # one list call for every job's nodes
    busy = next(x for x in rows.values() if x["id"] != quiet["job"])
    assert 0 < busy["utilization"] <= 35 and busy["inputBound"] is True
    assert 0 <= busy["idleShare"] < 0.5
    table = cli("jobs")
    assert table.code == 0, table.err
    header = table.out.splitlines()[0].split()
    assert header[-2:] == ["UTIL", "IDLE"]
    assert any("input-bound?" in x for x in table.out.splitlines()[1:])

    emulator.monitoring(ingestion_delay=3600)  # nothing ingested yet
    rows = {x["id"]: x for x in json.loads(cli("jobs", "--json").out)}
    assert {x["metricsNote"] for x in rows.values()} == {"no metrics yet"}
    assert all(x["utilization"] is None for x in rows.values())
    assert "no metrics yet" in cli("jobs").out

    emulator.config(services={"monitoring.googleapis.com": False})
    off = cli("jobs")
    assert off.code == 0, off.err
    notes = [x for x in off.err.splitlines() if "no TensorCore figures" in x]
    assert len(notes) == 1 and "monitoring" in notes[0].lower()
    assert "Traceback" not in off.err
