"""The agent's look at its chips (agent/chips.py) against an emulated worker's libtpu
metrics server (emulator/workers/chips.py): the figures per chip, a Python without gRPC
or nothing serving said as such, a status written only when the figures change; and
what `tpuctl jobs` keeps of a planted status (services/chips.py)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tpuctl.agent import chips, protocol
from tpuctl.emulator.core.errors import ApiError
from tpuctl.emulator.workers.chips import Chips as EmulatedChips
from tpuctl.services.chips import job_chips

GIB = 1 << 30


class FakeStatus:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.value: dict[str, Any] = {}
        self.writes = 0

    def write(self, **changes: Any) -> None:
        self.value.update(changes)
        self.writes += 1


@pytest.fixture
def served() -> Iterator[tuple[EmulatedChips, dict[str, str]]]:
    emulated = EmulatedChips()
    port = emulated.port("w/uid/0", "v5p", 4)
    try:
        yield emulated, {"TPU_RUNTIME_METRICS_PORTS": f"{port},{port + 1}"}
    finally:
        emulated.forget()


def _looker(env: dict[str, str], python: str = sys.executable) -> chips.Chips:
    return chips.Chips(lambda: [python], FakeStatus(), env=env)


def test_each_chip_shows_what_libtpu_serves(served: Any) -> None:
    emulated, env = served
    emulated.update("w/uid/0", "v5p", 4, [{"chip": 2, "hbm_used": 90 * GIB, "duty_cycle": 99.5}])
    looker = _looker(env)
    try:
        seen = looker.look()
    finally:
        looker.probes[sys.executable].close()
    assert seen["source"] == "libtpu" and "error" not in seen
    assert seen["address"] == f"localhost:{env['TPU_RUNTIME_METRICS_PORTS'].split(',')[0]}"
    idle = {"hbm_used": 0, "hbm_total": 95 * GIB, "duty_cycle": 0.0, "tensorcore_util": None}
    busy = {"hbm_used": 90 * GIB, "hbm_total": 95 * GIB, "duty_cycle": 99.5}
    assert seen["chips"] == [
        {"chip": 0, **idle},
        {"chip": 1, **idle},
        {"chip": 2, **busy, "tensorcore_util": None},  # this Python has no libtpu SDK
        {"chip": 3, **idle},
    ]


def test_the_status_is_written_when_the_figures_change_only(served: Any) -> None:
    emulated, env = served
    looker = _looker(env)
    try:
        looker.tick()
        looker.tick()  # the same figures: kept for the next heartbeat, not written
        assert looker.status.writes == 1 and looker.status.value["chips"]["chips"]
        emulated.update("w/uid/0", "v5p", 4, [{"chip": 0, "duty_cycle": 40}])
        looker.tick()
    finally:
        looker.probes[sys.executable].close()
    assert looker.status.writes == 2
    assert looker.status.value["chips"]["chips"][0]["duty_cycle"] == 40.0


def test_nothing_serving_is_said_with_the_address() -> None:
    looker = _looker({"TPU_RUNTIME_METRICS_PORTS": "1"})
    try:
        seen = looker.look()
    finally:
        looker.probes[sys.executable].close()
    assert seen["address"] == "localhost:1" and "chips" not in seen
    assert seen["error"].startswith(f"{chips.USED}: UNAVAILABLE"), seen


def test_a_python_without_grpc_is_said_and_the_next_one_is_asked(
    served: Any, tmp_path: Path
) -> None:
    _, env = served
    bare = tmp_path / "python"  # a Python without site-packages: no grpc there
    bare.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    bare.chmod(0o755)
    alone = _looker(env, str(bare))
    assert "no Python here has the grpc module" in alone.look()["error"]
    alone.probes.clear()  # asked again only after a while: no new probe meanwhile
    assert "no Python here has the grpc module" in alone.look()["error"]
    assert alone.probes == {}
    both = chips.Chips(lambda: [str(bare), sys.executable], FakeStatus(), env=env)
    try:
        assert len(both.look()["chips"]) == 4
    finally:
        for probe in both.probes.values():
            probe.close()


def test_a_probe_that_answers_nonsense_is_said_and_restarted(tmp_path: Path) -> None:
    odd = tmp_path / "python"  # answers every look with a line that is not its JSON
    odd.write_text('#!/bin/sh\nwhile read -r _; do echo "[1, 2]"; done\n')
    odd.chmod(0o755)
    looker = _looker({}, str(odd))
    seen = looker.look()
    assert seen["error"].startswith("a bad answer from the probe"), seen
    assert looker.probes[str(odd)].proc is None  # started again on the next look


def test_the_default_address_is_libtpus() -> None:
    assert chips.address({}) == "localhost:8431"
    assert chips.address({"TPU_RUNTIME_METRICS_PORTS": "8500,8501"}) == "localhost:8500"
    assert chips.address({"TPU_RUNTIME_METRICS_PORTS": "x"}) == "localhost:8431"


def test_the_emulator_stops_the_servers_of_nodes_gone() -> None:
    emulated = EmulatedChips()
    try:
        kept = emulated.port("i/kept/0", "v4", 4)
        emulated.port("i/gone/1", "v4", 4)
        emulated.forget({"i/kept"})
        assert set(emulated.servers) == {"i/kept/0"} and set(emulated.values) == {"i/kept/0"}
        assert emulated.port("i/kept/0", "v4", 4) == kept  # the same server goes on
    finally:
        emulated.forget()
    assert emulated.servers == {} and emulated.pool is None


def test_the_emulator_refuses_a_chip_out_of_range_or_a_bad_figure() -> None:
    emulated = EmulatedChips()
    with pytest.raises(ApiError, match="chip 4 is out of range"):
        emulated.update("w/uid/0", "v4", 4, [{"chip": 4, "hbm_used": 1}])
    with pytest.raises(ApiError, match="duty_cycle must be a number >= 0"):
        emulated.update("w/uid/0", "v4", 4, [{"chip": 0, "duty_cycle": "busy"}])


def test_a_planted_status_gives_only_well_formed_figures() -> None:
    st = {
        0: {
            "state": protocol.RUNNING,
            "chips": {
                "source": "libtpu",
                "at": 100.0,
                "chips": [
                    {"chip": 0, "hbm_used": 5, "hbm_total": 10, "duty_cycle": 50},
                    {"chip": 1, "hbm_used": -1, "hbm_total": "x", "duty_cycle": True},
                    {"chip": 2, "hbm_used": float("inf"), "tensorcore_util": 101.0},
                    "not a chip",
                    *({"chip": k} for k in range(3, 200)),
                ],
            },
        },
        1: {"state": protocol.SUCCEEDED, "chips": {"source": "libtpu", "chips": []}},
        2: {"state": protocol.RUNNING, "chips": "nonsense"},
    }
    [worker] = job_chips(st, now=103.0)
    assert worker["worker"] == 0 and worker["age"] == 3.0 and worker["error"] is None
    none = dict.fromkeys(["hbmUsed", "hbmTotal", "dutyCycle", "tensorcoreUtilization"])
    figures = {"hbmUsed": 5, "hbmTotal": 10, "dutyCycle": 50.0}
    assert worker["chips"][0] == {**none, "chip": 0, **figures}
    assert worker["chips"][1] == {**none, "chip": 1}
    assert worker["chips"][2] == {**none, "chip": 2}  # infinite bytes, 101 percent
    assert len(worker["chips"]) == 63  # at most 64 entries read, one of them no chip


def _answers(used: list[int], total: list[int], duty: list[float]) -> dict[str, Any]:
    import base64

    from tpuctl.emulator.workers.chips import response

    def encoded(name: str, values: list[Any]) -> str:
        return base64.b64encode(response(name, values, 0.0)).decode()

    return {
        chips.USED: encoded(chips.USED, used),
        chips.TOTAL: encoded(chips.TOTAL, total),
        chips.DUTY: encoded(chips.DUTY, duty),
    }


def test_a_chips_duty_cycle_is_shown_for_each_of_its_two_devices() -> None:
    """Memory per device (8: two per chip), duty cycle per chip (4), as libtpu serves them
    on a v3-8: each device gets its chip's duty cycle, by position."""
    answer = chips.figures(_answers([1, 2, 3, 4, 5, 6, 7, 8], [16] * 8, [10.0, 20.0, 30.0, 40.0]))
    rows = answer["chips"]
    assert [r["chip"] for r in rows] == list(range(8))
    assert [r["duty_cycle"] for r in rows] == [10.0, 10.0, 20.0, 20.0, 30.0, 30.0, 40.0, 40.0]
    assert [r["hbm_used"] for r in rows] == [1, 2, 3, 4, 5, 6, 7, 8]


@pytest.mark.parametrize(
    ("duty", "expected"),
    [
        ([10.0, 20.0, 30.0, 40.0], [10.0, 20.0, 30.0, 40.0]),  # one point per device
        ([10.0, 20.0, 30.0], [10.0, 20.0, 30.0, None]),  # no whole multiple: kept by id
    ],
)
def test_a_duty_cycle_per_device_or_of_no_whole_multiple_is_kept_by_id(
    duty: list[float], expected: list[float | None]
) -> None:
    rows = chips.figures(_answers([1, 2, 3, 4], [16] * 4, duty))["chips"]
    assert [r["duty_cycle"] for r in rows] == expected
