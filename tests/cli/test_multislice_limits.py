"""The bounds of a multislice request: `--slices` past what tpuctl takes is a usage error
before any call, and a count within it is checked against quota for every slice, on both
APIs and for `create` and `run` alike, before anything is made or priced."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import one_line_error
from tpuctl.queueing import MAX_SLICES

ZONE = "us-central1-a"
V3 = "TPUV3sPerProjectPerZoneForTPUAPI"
CE_ZONE, CE_FAMILY = "us-east1-d", "TPUS-PER-TPU-FAMILY-per-project-region"


def _nothing_made(emulator) -> None:  # noqa: ANN001
    assert emulator.nodes() == [] and emulator.queued() == [] and emulator.instances() == []
    assert "POST create" not in emulator.requests()


@pytest.fixture
def script(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text("print('hi')\n")
    return tmp_path / "train.py"


@pytest.mark.parametrize("command", ["create", "run"])
@pytest.mark.parametrize("count", [str(MAX_SLICES + 1), "100000"])
def test_too_many_slices_is_refused_before_any_call(cli, emulator, script, command, count) -> None:
    first = ["create", "ms"] if command == "create" else ["run", str(script), "--no-check"]
    r = cli(*first, "-a", "v3-8", "--zone", ZONE, "--slices", count)
    assert r.code == 2, r.err
    assert one_line_error(r) == (
        f"error: --slices must be at most {MAX_SLICES} (slices in one multislice request), "
        f"not {count}"
    )
    assert "about $" not in r.err  # no price for what is refused
    _nothing_made(emulator)


def test_a_job_file_with_too_many_slices_names_its_line(cli, emulator, script) -> None:
    job = script.parent / "job.toml"
    job.write_text(f'script = "train.py"\naccelerator = "v3-8"\nslices = {MAX_SLICES + 1}\n')
    r = cli("run", "-f", str(job), "--zone", ZONE)
    assert r.code == 2, r.err
    assert f"job.toml:3: slices: --slices must be at most {MAX_SLICES}" in one_line_error(r)
    _nothing_made(emulator)


@pytest.mark.parametrize("command", ["create", "run"])
def test_slices_past_quota_are_refused_counting_every_slice(cli, emulator, script, command) -> None:
    emulator.quotas({V3: {ZONE: 32}})  # 4 v3-8 slices fit (8 cores each), 5 do not
    first = ["create", "ms"] if command == "create" else ["run", str(script), "--no-check"]
    r = cli(*first, "-a", "v3-8", "--zone", ZONE, "--slices", "5")
    assert r.code == 5, r.err
    assert one_line_error(r) == (
        f"error: quota exceeded: 5 x v3-8 (on-demand) needs 40 cores of {V3}, which allows "
        f"32 in zone {ZONE}; 0 in use"
    )
    assert f"ask for at least 40 cores of {V3} in zone {ZONE}" in r.err
    assert "the 5 slices do not fit the current limit together" in r.err
    assert "about $" not in r.err
    _nothing_made(emulator)


def test_compute_engine_slices_past_quota_are_refused_counting_every_slice(cli, emulator) -> None:
    emulator.config(compute_quotas={f"{CE_FAMILY}/CT6E": {"us-east1": 32}})  # 2 x 16 fit
    r = cli("create", "ms", "-a", "v6e-16", "--api", "compute", "--zone", CE_ZONE,
            "--slices", "3")  # fmt: skip
    assert r.code == 5, r.err
    assert (
        f"3 x v6e-16 needs 48 chips of Compute Engine's {CE_FAMILY} (tpu_family CT6E) in "
        "region us-east1: the limit is 32, 0 in use"
    ) in one_line_error(r)
    assert "about $" not in r.err
    _nothing_made(emulator)
