"""Zone failover in `tpuctl run --zone a,b` (and `zones = [...]`): a zone without capacity
or quota is skipped, saying why; the job runs in the next and leaves no node anywhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import one_line_error
from tests.cli.test_run import bucket_objects, wait_for

V3_ZONAL = "TPUV3sPerProjectPerZoneForTPUAPI"
SCRIPT = 'import os\nprint("ran in job", os.environ["TPUCTL_JOB_ID"])\n'


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "proj" / "job.py"
    path.parent.mkdir()
    path.write_text(SCRIPT)
    return path


def _record(emulator) -> dict:  # noqa: ANN001
    (record,) = [
        json.loads(v) for k, v in bucket_objects(emulator).items() if k.endswith("/job.json")
    ]
    return record


def test_no_capacity_in_the_first_zone_runs_in_the_second(cli, emulator, script) -> None:
    emulator.capacity({"us-central1-a": {"v3": 0}})
    r = cli("run", str(script), "-a", "v3-8", "--zone", "us-central2-b,us-central1-a,us-central1-b")
    assert r.code == 0, r.err
    assert "ran in job" in r.out
    # before the first create: each zone's price and quota; a zone without v3 is dropped
    assert "zones for v3-8 (on-demand), tried in this order" in r.err
    assert "  us-central1-a: about $8.00/h; quota: 128 of 128 cores free in zone" in r.err
    assert "  us-central1-b: about $8.00/h; quota: 128 of 128 cores free in zone" in r.err
    assert "zone us-central2-b dropped: accelerator type 'v3-8' is not offered" in r.err
    assert "zone us-central1-a skipped: no capacity for tpuctl-" in r.err
    assert "is in us-central1-b" in r.err
    assert r.err.index("zones for v3-8") < r.err.index("skipped")
    assert _record(emulator)["zone"] == "us-central1-b"  # recorded where it ran
    assert "warning: bucket" not in r.err  # both zones are in the bucket's region
    assert emulator.nodes() == []


def test_exhausted_quota_in_the_first_zone_runs_in_the_second(cli, emulator, script) -> None:
    emulator.quotas({V3_ZONAL: {"us-central1-a": 0}})
    r = cli("run", str(script), "--zone", "us-central1-a,us-central1-b", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["zone"] == "us-central1-b"  # stdout holds only the JSON
    assert "us-central1-a: about $8.00/h; quota: 0 of 0 cores free in zone us-central1-a" in r.err
    assert "zone us-central1-a skipped: quota exceeded" in r.err
    assert _record(emulator)["zone"] == "us-central1-b"
    # the refused zone never had a node: one create call, in the second zone
    assert emulator.requests().get("POST create") == 1
    assert emulator.nodes() == []


def test_every_zone_failing_lists_each_and_leaves_nothing(cli, emulator, script) -> None:
    emulator.capacity({"us-central1-a": {"v3": 0}})
    emulator.quotas({V3_ZONAL: {"us-central1-b": 0}})
    r = cli("run", str(script), "--zone", "us-central1-a,us-central1-b")
    assert r.code == 5, r.err
    line = one_line_error(r, after_call=True)
    assert line.startswith("error: no zone could take v3-8 for job ")
    assert "us-central1-a: no capacity for tpuctl-" in line
    assert "us-central1-b: quota exceeded" in line
    assert "zone us-central1-a skipped" in r.err
    assert emulator.nodes() == []
    assert _record(emulator)["zone"] in ("us-central1-a", "us-central1-b")
    states = [
        json.loads(v)["state"] for k, v in bucket_objects(emulator).items() if "/status/" in k
    ]
    assert states == ["FAILED"]  # the job's record ends, as for one zone


def test_zones_that_do_not_offer_the_accelerator(cli, emulator, script) -> None:
    r = cli("run", str(script), "-a", "v3-8", "--zone", "us-central2-b,us-east1-d")
    assert r.code == 2, r.err
    line = one_line_error(r, after_call=True)
    assert "none of the zones asked for can create v3-8: us-central2-b: accelerator type" in line
    assert "us-east1-d: accelerator type 'v3-8' is not offered in zone us-east1-d" in line
    assert emulator.requests().get("POST create") is None
    r = cli("run", str(script), "--zone", "us-central1-a,,b")
    assert r.code == 2
    assert "invalid --zone 'us-central1-a,,b': an empty zone" in one_line_error(r)
    r = cli("run", str(script), "--node", "mine", "--zone", "us-central1-a,us-central1-b")
    assert r.code == 2
    assert "--node names a node in one zone" in one_line_error(r)


def test_zones_from_the_config_file_and_a_bucket_in_another_region(cli, emulator, script) -> None:
    config = Path(os.environ["TPUCTL_CONFIG"])
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('zones = ["us-central1-a", "europe-west4-a"]\n')
    emulator.capacity({"us-central1-a": {"v3": 0}})
    r = cli("run", str(script))
    assert r.code == 0, r.err
    assert "zone us-central1-a skipped: no capacity" in r.err
    # the bucket was made in the region of the first zone tried
    assert (
        "warning: bucket gs://tpuctl-demo-tpuctl is in us-central1, the node in europe-west4"
        in r.err
    )
    assert _record(emulator)["zone"] == "europe-west4-a"
    assert emulator.nodes() == []


def test_a_recreate_after_preemption_fails_over(emulator, script) -> None:
    script.write_text(
        "import os, time\n"
        "if os.environ['TPUCTL_RESTART'] == '0':\n"
        "    time.sleep(120)\n"
        "print('attempt', os.environ['TPUCTL_RESTART'], 'done')\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "tpuctl", "run", str(script), "--spot", "--restarts", "1",
         "--zone", "us-central1-a,us-central1-b"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )  # fmt: skip
    try:
        wait_for(
            lambda: any(
                b'"RUNNING"' in v
                for v in bucket_objects(emulator, lambda k: "/status/" in k).values()
            )
        )
        (node,) = emulator.nodes()
        assert "/locations/us-central1-a/" in node["name"]
        emulator.capacity({"us-central1-a": {"v3": 0}})  # no room to come back there
        emulator.preempt(node["name"])
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "attempt 1 done" in out
    assert "zone us-central1-a skipped: no capacity" in err
    assert "is in us-central1-b" in err
    assert _record(emulator)["zone"] == "us-central1-b"
    assert emulator.nodes() == []


def test_create_fails_over_too(cli, emulator) -> None:
    emulator.capacity({"us-central1-a": {"v3": 0}})
    r = cli("create", "mine", "-a", "v3-8", "--zone", "us-central1-a,us-central1-b", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["zone"] == "us-central1-b"
    assert "us-central1-a: about $8.00/h; quota: 128 of 128 cores free" in r.err
    assert "zone us-central1-a skipped: no capacity for mine" in r.err
    assert [n["name"] for n in emulator.nodes()] == [
        "projects/tpuctl-demo/locations/us-central1-b/nodes/mine"
    ]
    assert cli("delete", "mine", "--zone", "us-central1-b", "--yes").code == 0
    emulator.quotas({V3_ZONAL: {"us-central1-b": 0}})
    r = cli("create", "mine", "-a", "v3-8", "--zone", "us-central1-a,us-central1-b")
    assert r.code == 5, r.err
    line = one_line_error(r, after_call=True)
    assert line.startswith("error: no zone could take v3-8 node mine: us-central1-a: no capacity")
    assert "; us-central1-b: quota exceeded" in line
    assert emulator.nodes() == []
    r = cli("list", "--zone", "us-central1-a,us-central1-b")
    assert r.code == 2
    assert "this command works in one zone" in one_line_error(r)


def test_quota_that_cannot_be_read_is_said_and_does_not_block(cli, emulator) -> None:
    emulator.config(quotas_api="denied")
    emulator.capacity({"us-central1-a": {"v3": 0}})
    r = cli("create", "mine", "-a", "v3-8", "--zone", "us-central1-a,us-central1-b")
    assert r.code == 0, r.err
    assert "  us-central1-a: about $8.00/h; quota: not readable (" in r.err
    assert "  us-central1-b: about $8.00/h; quota: not readable (" in r.err
    assert "zone us-central1-a skipped: no capacity" in r.err
    assert cli("delete", "mine", "--zone", "us-central1-b", "--yes").code == 0
    assert emulator.nodes() == []
