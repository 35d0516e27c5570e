"""A job hung on a multi-host node: the agents say so (`tpuctl jobs`), and `tpuctl stacks`
shows the one worker waiting elsewhere, and the others' common stacks once."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.cli.test_run import bucket_objects, wait_for

# Worker 1 waits for a peer that never comes; the others wait in another function.
SCRIPT = """\
import os
import threading

never = threading.Event()


def wait_for_peer():
    never.wait()  # worker 1 blocks here


def all_reduce():
    never.wait()  # the others block here


print("started", os.environ["TPUCTL_WORKER_ID"], flush=True)
if os.environ["TPUCTL_WORKER_ID"] == "1":
    wait_for_peer()
else:
    all_reduce()
"""


@pytest.mark.long
def test_a_hung_job_is_reported_and_its_stacks_point_at_the_odd_worker(
    cli, emulator, tmp_path: Path
) -> None:
    (tmp_path / "job").mkdir()
    script = tmp_path / "job" / "hang.py"
    script.write_text(SCRIPT)
    flags = ["-a", "v4-32", "-z", "us-central2-b", "--detach", "--json", "--hang-after", "2s"]
    r = cli("run", str(script), *flags)
    assert r.code == 0, r.err
    job = json.loads(r.out)["job"]
    try:

        def hung() -> bool:
            row = json.loads(cli("jobs", job, "--json").out)
            return row["state"] == "RUNNING" and row["hungWorkers"] == [0, 1, 2, 3]

        wait_for(hung, timeout=120)
        shown = cli("jobs", job)
        assert re.search(r"RUNNING \(hung \d+s\?\)", shown.out), shown.out
        assert f"`tpuctl stacks {job}`" in shown.out

        taken = cli("stacks", job)
        assert taken.code == 0, taken.err
        out = taken.out
        # the odd worker is called out, with its script's blocking line
        odd = out.index("=== w1 DIFFERS from the others:")
        assert "in wait_for_peer" in out[odd:]
        assert "never.wait()  # worker 1 blocks here" in out[odd:]
        # the other three share their stacks: shown once
        assert "=== w0, w2, w3 (3 of 4):" in out
        assert out.count("in all_reduce") == 1
        assert out.count("never.wait()  # the others block here") == 1
        kept = [k for k in bucket_objects(emulator) if f"jobs/{job}/stacks/" in k]
        assert sorted(k.rsplit("/", 1)[1] for k in kept) == [f"worker-{k}.txt" for k in range(4)]
        # the job went on: a stack is no stop, and the log says the hang once per worker
        wait_for(lambda: cli("logs", job).out.count("may be hung") == 4)
        bad = cli("stacks", job, "-w", "4")
        assert bad.code == 2 and f"job {job} has no worker 4" in bad.err
    finally:
        assert cli("cancel", job).code == 0
        wait_for(lambda: emulator.nodes() == [], timeout=120)
    wait_for(lambda: json.loads(cli("jobs", job, "--json").out)["state"] == "CANCELLED")
    ended = cli("stacks", job)
    assert ended.code == 1 and f"job {job} runs no setup or script now" in ended.err
