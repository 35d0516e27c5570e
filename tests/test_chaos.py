"""The chaos harness's short, seeded version: a regression in what it measures fails CI."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parents[1] / "bench" / "chaos.py"
RUN_LIMIT = 720  # seconds the quick run may take (on a loaded 2-core machine)


# The suite's per-test limit (300 s) would cut the run off before its own limit does and
# leave the harness's emulator and processes behind: the run's limit governs here.
@pytest.mark.timeout(RUN_LIMIT + 60)
@pytest.mark.long
def test_the_quick_chaos_run_keeps_every_promise(isolated_env: Path) -> None:
    r = subprocess.run(
        [sys.executable, str(HARNESS), "--quick", "--json"],
        capture_output=True,
        text=True,
        timeout=RUN_LIMIT,
        check=False,
    )
    results = json.loads(r.stdout.splitlines()[-1]) if r.stdout.strip() else []
    assert [o["name"] for o in results] == [
        "run under 30% API faults",
        "SIGKILL of run at a random moment",
        "SIGINT/TERM/HUP in run, create, create --queued",
        "malformed input",
        "agent, script, node or emulator gone mid-job",
        "injected host keys",
        "record rewritten between attempts",
        "bucket squatted before the first run",
        "two `run --node` on one node at once",
        "client killed between READY and the agents' start",
        "gc confirming after a keep",
        "a sweep's runs at once on a new machine",
        "run on Compute Engine under 30% API faults",
        "SIGKILL of run on Compute Engine at a random moment",
        "SIGINT in run and create on Compute Engine",
        "one VM of a slice preempted mid-job",
        "run --slices 2 on Compute Engine: faults, SIGKILL, a slice preempted",
    ], r.stderr
    for o in results:
        assert o["runs"] > 0
        # a string, so that pytest shows it whole (the notes say what went wrong)
        assert (o["good"], o["leaked"], o["tracebacks"]) == (o["runs"], 0, 0), json.dumps(o)
    assert r.returncode == 0, r.stderr


def test_only_picks_scenarios_and_groups_in_the_harness_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(HARNESS.parent))  # its siblings, which it imports
    spec = importlib.util.spec_from_file_location("chaos", HARNESS)
    assert spec and spec.loader
    chaos = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "chaos", chaos)
    spec.loader.exec_module(chaos)
    compute = [
        "faults-compute",
        "sigkill-compute",
        "signals-compute",
        "preempt-compute",
        "multislice-compute",
    ]
    assert chaos.selected(["compute"]) == compute
    assert chaos.selected(["preempt-compute", "faults"]) == ["faults", "preempt-compute"]
    assert chaos.selected(["compute", "sigkill-compute"]) == compute
    assert chaos.selected(None) == list(chaos.SCENARIOS)
    assert chaos.selected(["tpu"]) + compute == list(chaos.SCENARIOS)
    with pytest.raises(SystemExit) as refused:  # before any emulator starts
        chaos.main(["--only", "nothing"])
    assert refused.value.code == 2
