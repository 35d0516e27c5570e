"""The examples in the README and docs/ run as written against the emulator.

A fenced block whose info string is `sh runnable` is run, with the other runnable blocks
of the same page, in order, in one bash (`set -euo pipefail`). The one change made to
the text: the emulator's default port 8470 becomes a free one, so the run never meets
another emulator.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tpuctl.emulator.core.ports import free_port

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```sh runnable\n(.*?)^```", re.S | re.M)


def runnable(page: Path) -> str:
    return "".join(BLOCK.findall(page.read_text()))


RUNNABLE = [p for p in PAGES if runnable(p)]


def test_the_pages_people_start_from_have_runnable_examples() -> None:
    names = {p.name for p in RUNNABLE}
    assert {"README.md", "ssh.md", "emulator.md"} <= names


@pytest.mark.parametrize("page", RUNNABLE, ids=[p.name for p in RUNNABLE])
def test_runnable_examples_run_as_written(page: Path, isolated_env: Path, tmp_path: Path):
    port = free_port()
    script = runnable(page).replace("127.0.0.1:8470", f"127.0.0.1:{port}")
    script = script.replace("emulator start --detach", f"emulator start --detach --port {port}")
    work = tmp_path / "work"
    work.mkdir()
    (work / "examples").symlink_to(ROOT / "examples")  # paths as in a checkout
    env = {k: v for k, v in os.environ.items() if k != "TPUCTL_EMULATOR_HOST"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["TPUCTL_STATE_DIR"] = str(tmp_path / "state")
    try:
        r = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )
    finally:  # whatever happened, no emulator is left running
        subprocess.run(
            [sys.executable, "-m", "tpuctl", "emulator", "stop"],
            env=env,
            capture_output=True,
            timeout=60,
            check=False,
        )
    assert r.returncode == 0, (
        f"{page.name}:\n{script}\n--- stdout\n{r.stdout}\n--- stderr\n{r.stderr}"
    )


def test_the_readme_shows_every_capture_that_make_docs_images_writes() -> None:
    script = (ROOT / "scripts" / "docs_images.py").read_text()
    names = re.findall(r'capture\(\s*"(\w+)"', script)
    assert names, "no capture found in scripts/docs_images.py"
    readme = (ROOT / "README.md").read_text()
    for name in names:
        assert (ROOT / "docs" / "images" / f"{name}.svg").is_file(), name
        assert f"(docs/images/{name}.svg)" in readme, name


def test_metrics_md_names_every_metric_with_its_kind_type_and_unit() -> None:
    """Issue 12: the metric names and their sources are in docs/ — every metric the
    emulator serves and tpuctl reads, on docs/metrics.md's table with what the emulator
    says of it, and the sources named."""
    from tpuctl.cloud import monitoring
    from tpuctl.emulator.monitoring.query import METRICS, RESOURCE
    from tpuctl.services import usage

    page = (ROOT / "docs" / "metrics.md").read_text()
    rows = {line.split("|")[1].strip(" `"): line for line in page.splitlines()
            if line.startswith("| `tpu.googleapis.com/")}  # fmt: skip
    for metric, (kind, value_type, unit, _) in METRICS.items():
        assert metric in rows, metric
        assert f"{kind}, {value_type}" in rows[metric] and f"| {unit} " in rows[metric], metric
    assert monitoring.IDLE in rows and monitoring.TENSORCORE in rows
    assert f"**`{RESOURCE}`**" in page and monitoring.RESOURCE == RESOURCE
    for source in ("tpu-node-monitoring", "performance-guide", "latency-n-retention",
                   "kHighlyInfeedBoundThresholdInPercent"):  # fmt: skip
        assert source in page, source
    assert f"below {usage.INPUT_BOUND:.0f}%" in page
