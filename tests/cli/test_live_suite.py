"""`make test-live` (scripts/live_test.py), rehearsed against the emulator: skipped without
its variables, asks before it spends, picks the cheapest single-host spot type, and
leaves nothing behind, even when its scenarios are killed outright."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tpuctl import catalog
from tpuctl.services import cost
from tpuctl.waiting import poll_until

ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / "scripts" / "live_test.py"
ZONE = "us-central1-a"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TPUCTL_LIVE_")}
    env.update(TMPDIR=str(tmp_path), **extra)
    return env


def _live(tmp_path: Path) -> dict[str, str]:
    return _env(tmp_path, TPUCTL_LIVE_PROJECT="tpuctl-demo", TPUCTL_LIVE_ZONE=ZONE)


def _names(emulator: Any) -> list[str]:
    return sorted(n["name"].rsplit("/", 1)[1] for n in emulator.nodes())


def test_without_a_project_it_says_why_and_succeeds(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(RUNNER)], env=_env(tmp_path), capture_output=True, text=True
    )
    assert done.returncode == 0
    assert "skipped: TPUCTL_LIVE_PROJECT and TPUCTL_LIVE_ZONE not set" in done.stderr
    assert "contributing/live-testing.md" in done.stderr


def test_it_asks_before_it_spends(emulator, tmp_path: Path) -> None:  # noqa: ANN001
    done = subprocess.run(
        [sys.executable, str(RUNNER)],
        env=_live(tmp_path),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert re.search(r"at worst 4 nodes for their whole 2h TTL: \$\d+\.\d\d", done.stderr)
    assert "not started: confirm with --yes" in done.stderr
    assert emulator.nodes() == []


@pytest.mark.long
def test_a_rehearsal_runs_every_scenario_and_leaves_nothing(emulator, tmp_path: Path) -> None:  # noqa: ANN001
    done = subprocess.run(
        [sys.executable, str(RUNNER), "--yes"],
        env=_live(tmp_path),
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert re.search(r"5 passed", done.stdout)
    pager = emulator.tpu_client().list_accelerator_types(
        parent=f"projects/tpuctl-demo/locations/{ZONE}"
    )
    offered = [a.type_ for a in pager]
    singles = [catalog.parse_accelerator(a) for a in offered]
    cheapest = min(
        (cost.hourly(a, True) or float("inf"), a.chips, a.name) for a in singles if a.workers == 1
    )
    assert f": {cheapest[2]} (spot, " in done.stderr
    assert "nothing left behind" in done.stderr
    assert emulator.nodes() == [] and emulator.queued() == []


def test_scenarios_killed_outright_are_swept_and_named(emulator, tmp_path: Path) -> None:  # noqa: ANN001
    runner = subprocess.Popen(
        [sys.executable, str(RUNNER), "--yes", "-k", "create_describe"],
        env=_live(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert runner.stderr is not None
    started = ""
    while "scenarios started" not in started:
        started = runner.stderr.readline()
        assert started, "the runner ended before its scenarios started"
    child = int(re.search(r"pid (\d+)", started).group(1))  # type: ignore[union-attr]
    poll_until(
        lambda: (any(n.startswith("tlive-") for n in _names(emulator)) or None, "no node yet"),
        what="the scenario's node",
        timeout=60,
    )
    os.kill(child, signal.SIGKILL)
    out, err = runner.communicate(timeout=120)
    assert runner.returncode != 0
    (node,) = re.findall(r"deleted node (tlive-\w+-node) \(left by live run", err)
    assert node not in _names(emulator)
    assert "the scenarios left 1 behind; the sweep deleted them" in err


def _left_expired(cli, emulator, name: str) -> None:  # noqa: ANN001
    """A node as an earlier run left it, its TTL passed: tpuctl's labels, but no watchdog
    on it (the emulator boots at once, and a node's watchdog enforces its TTL a few
    seconds after its boot: the sweep would race it)."""
    from google.cloud import tpu_v2

    assert cli("create", "template", "-a", "v3-8", "--ttl", "1h").code == 0
    parent = f"projects/tpuctl-demo/locations/{ZONE}"
    client = emulator.tpu_client()
    made = client.get_node(name=f"{parent}/nodes/template")
    labels = {**made.labels, "tpuctl-expires": str(int(made.create_time.timestamp()) - 60)}
    assert cli("delete", "template", "--yes").code == 0
    node = tpu_v2.Node(accelerator_type="v3-8", runtime_version=made.runtime_version,
                       labels=labels)  # fmt: skip
    client.create_node(parent=parent, node_id=name, node=node).result()


def test_what_an_earlier_crashed_run_left_is_swept_once_expired(cli, emulator, tmp_path) -> None:  # noqa: ANN001
    _left_expired(cli, emulator, "tlive-0ld000-node")
    assert cli("create", "tlive-0ld001-node", "-a", "v3-8", "--ttl", "2h").code == 0
    _left_expired(cli, emulator, "mine")  # expired too, but not the suite's

    def expired() -> tuple[bool | None, str]:
        plan = json.loads(cli("gc", "--dry-run", "--json").out)
        gone = {e["name"] for e in plan if e["action"] == "delete"}
        return ({"tlive-0ld000-node", "mine"} <= gone) or None, f"gc would delete {gone}"

    poll_until(expired, what="gc to see both expired", timeout=30)
    try:
        done = subprocess.run(
            [sys.executable, str(RUNNER)],
            env=_live(tmp_path),
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 2  # not confirmed: the sweep of expired runs came first
        assert "deleted node tlive-0ld000-node (an earlier live run's, expired)" in done.stderr
        assert _names(emulator) == ["mine", "tlive-0ld001-node"]  # not the suite's; not expired
    finally:
        for name in ("tlive-0ld001-node", "mine"):
            assert cli("delete", name, "--yes").code == 0
