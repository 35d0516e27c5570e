"""TensorCore utilisation from libtpu's SDK in the agent's look at its chips
(agent/chips.py), against an emulated worker's metrics server and its SDK stand-in
(emulator/workers/chips.py, libtpu_sdk.py): per chip where the SDK imports, odd values
left out, and the gRPC figures kept whatever the SDK does."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agent.test_chips import FakeStatus
from tpuctl.agent import chips
from tpuctl.emulator.core.errors import ApiError
from tpuctl.emulator.workers import libtpu_sdk
from tpuctl.emulator.workers.chips import Chips as EmulatedChips

MARKER = "w/uid/0"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[EmulatedChips, dict[str, str], Path]]:
    emulated = EmulatedChips()
    port = emulated.port(MARKER, "v6e", 4)
    site = tmp_path / "site-packages"
    try:
        yield emulated, {"TPU_RUNTIME_METRICS_PORTS": str(port), "PYTHONPATH": str(site)}, site
    finally:
        emulated.forget()


def _look(env: dict[str, str], times: int = 1) -> list[dict[str, Any]]:
    looker = chips.Chips(lambda: [sys.executable], FakeStatus(), env=env)
    try:
        return [looker.look() for _ in range(times)]
    finally:
        looker.probes[sys.executable].close()


def _utils(seen: dict[str, Any]) -> list[Any]:
    return [c["tensorcore_util"] for c in seen["chips"]]


def test_each_chip_shows_the_sdks_tensorcore_utilisation(served: Any) -> None:
    emulated, env, site = served
    set_ = [{"chip": 1, "tensorcore_util": 13.6}, {"chip": 3, "tensorcore_util": 100}]
    emulated.update(MARKER, "v6e", 4, set_)
    libtpu_sdk.publish(site, emulated.tensorcore(MARKER))
    [seen] = _look(env)
    assert _utils(seen) == [0.0, 13.6, 0.0, 100.0], seen
    assert [c["hbm_total"] for c in seen["chips"]] == [32 << 30] * 4


def test_without_the_sdk_or_with_one_that_fails_the_grpc_figures_stay(served: Any) -> None:
    emulated, env, site = served
    emulated.update(MARKER, "v6e", 4, [{"chip": 0, "duty_cycle": 70}], sdk=False)
    libtpu_sdk.publish(site, emulated.tensorcore(MARKER))
    assert not (site / "libtpu").exists()
    [seen] = _look(env)
    assert _utils(seen) == [None] * 4 and seen["chips"][0]["duty_cycle"] == 70.0

    libtpu_sdk.publish(site, [1.0, 2.0, 3.0, 4.0])
    (site / "libtpu" / libtpu_sdk.VALUES).write_text("not json")  # get_metric raises
    [seen] = _look(env)
    assert _utils(seen) == [None] * 4 and seen["chips"][0]["duty_cycle"] == 70.0


def test_an_sdk_whose_import_kills_the_probe_is_left_out_next_time(served: Any) -> None:
    _, env, site = served
    (site / "libtpu").mkdir(parents=True)
    (site / "libtpu" / "__init__.py").write_text("import os\nos._exit(3)\n")
    first, second = _look(env, times=2)
    assert "no answer" in first["error"], first
    assert _utils(second) == [None] * 4 and second["chips"][0]["hbm_total"] == 32 << 30


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["13.60", "0", "100.00", "7%"], [13.6, 0.0, 100.0, 7.0]),  # text, as tpu-info shows
        ([12, 3.25, True, None], [12.0, 3.2, None, None]),  # numbers; no bool, no null
        (["-1", "101", "nan", "x" * 50], [None] * 4),  # out of 0..100, NaN, too long
        (["1e999", "inf", "", "busy"], [None] * 4),
        (["1", "2", "3"], [None] * 4),  # not one per chip: none placed
        ([str(v) for v in range(200)], [None] * 4),  # far too many
        ({"error": "RuntimeError('no agent')"}, [None] * 4),
        ("13.6", [None] * 4),
    ],
)
def test_odd_sdk_values_are_left_out(values: Any, expected: list[Any]) -> None:
    assert chips.tensorcore(values, 4) == expected


def test_the_emulator_refuses_a_tensorcore_utilisation_out_of_range() -> None:
    emulated = EmulatedChips()
    with pytest.raises(ApiError, match="tensorcore_util is a percent: 0 to 100"):
        emulated.update(MARKER, "v4", 4, [{"chip": 0, "tensorcore_util": 150}])
    with pytest.raises(ApiError, match="tensorcore_util must be a number >= 0"):
        emulated.update(MARKER, "v4", 4, [{"chip": 0, "tensorcore_util": "x"}])


def test_jax_imports_quietly_beside_the_stand_in(tmp_path: Path) -> None:
    """As on a fresh TPU VM with libtpu installed: `import jax` finds the library's path
    (and no chip on the PCI bus here) and warns nothing."""
    pytest.importorskip("jax")
    site = tmp_path / "site-packages"
    libtpu_sdk.publish(site, [0.0])
    code = "import jax; print(jax.devices()[0].platform)"
    r = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(site)},
                       capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert r.returncode == 0 and r.stdout.strip() == "cpu", r.stderr
    assert "cloud_tpu_init" not in r.stderr and "Warning" not in r.stderr, r.stderr
