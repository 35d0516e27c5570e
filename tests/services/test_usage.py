"""services/usage.py against the emulator's Cloud Monitoring: jobs on different nodes get
their own figures from one list call, each inside its own window; a deleted node's series
still count; a multislice job's window covers its slices."""

from __future__ import annotations

import time
from typing import Any

from tests.emulator.monitoring_helpers import on_worker  # noqa: F401 - a fixture
from tests.emulator.ssh_helpers import create, delete
from tpuctl.cloud.clients import ClientFactory
from tpuctl.services import usage

Z = "us-central1-a"


def test_one_call_many_jobs_each_in_its_window(emulator: Any, on_worker: Any) -> None:  # noqa: F811
    a = create(emulator, "usage-a", "v3-8")
    b = create(emulator, "usage-b", "v3-8")
    try:
        on_a, on_b = on_worker(a.name), on_worker(b.name)
        emulator.sample()  # before the jobs' windows: not theirs
        start = time.time()
        on_a.step("30")
        on_b.step("100")
        emulator.sample()
        emulator.sample()  # nothing written since: idle
        end_a = time.time()
        on_b.step("100")
        emulator.sample()
    finally:
        delete(emulator, a.name)  # node gone, series kept
    try:
        windows = {
            "ja": usage.Window(Z, ("usage-a",), start, end_a),
            "jb": usage.Window(Z, ("usage-b",), start, None),  # still running
            "old": usage.Window(Z, ("usage-a",), 0.0, 1.0),  # older than the look-back
            "elsewhere": usage.Window("us-east5-b", ("usage-a",), start, None),
        }
        before = sum(v for k, v in emulator.requests().items() if "timeSeries" in k)
        found = usage.job_usage(ClientFactory().monitoring, "tpuctl-demo", windows)
        after = sum(v for k, v in emulator.requests().items() if "timeSeries" in k)
        assert after - before == 1
        ja, jb = found["ja"], found["jb"]
        assert ja.samples == 8 and ja.util == 15.0 and ja.idle_share == 0.5  # 4 chips x 2
        assert ja.input_bound and ja.to_json()["inputBound"] is True
        assert jb.samples == 12 and jb.util is not None and round(jb.util) == 67
        assert not jb.input_bound and round(jb.idle_share or 0, 2) == 0.33
        assert "looks input-bound" in ja.describe() and "input-bound" not in jb.describe()
        assert found["old"].util is None and found["old"].note
        assert found["elsewhere"].note == usage.NO_METRICS_YET
    finally:
        delete(emulator, b.name)


def test_a_window_from_the_record_and_the_statuses() -> None:
    record = {"node": "q1", "slices": 2, "zone": Z, "created_unix": 100.0, "workers": 2}
    running = [{"started": 110.0, "ended": 150.0}, {"started": 105.0}]
    assert usage.window(record, running) == usage.Window(Z, ("q1-0", "q1-1"), 105.0, None)
    done = [{"started": 110.0, "ended": 150.0}, {"started": 105.0, "ended": 160.0}]
    assert usage.window(record, done) == usage.Window(Z, ("q1-0", "q1-1"), 105.0, 160.0)
    never = usage.window({**record, "slices": 1}, [])
    assert never == usage.Window(Z, ("q1",), 100.0, None)
    assert usage.window({"zone": Z}, []) is None


def test_no_figures_say_whether_samples_may_still_come() -> None:
    now = 10_000.0
    ended = [(now - usage.INGESTED_AFTER - 1, usage.NO_SAMPLES),  # every point is in
             (now - 60.0, usage.NO_METRICS_YET), (None, usage.NO_METRICS_YET)]  # fmt: skip
    for end, note in ended:
        found = usage.fold([], usage.Window(Z, ("n",), now - 3600.0, end), now)
        assert found.util is None and found.note == note, end
        assert found.describe() == f"TensorCore use: {note}"
