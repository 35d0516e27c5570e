"""A type with no public list price (TPU7x) says so once, where a price would be, and a
price set in the config file is used for it; never a `~-` left to guess at."""

from __future__ import annotations

import json
import os
from pathlib import Path

ZONE = "us-central1-c"  # where the emulated Compute Engine offers TPU7x


def _config(text: str) -> None:
    config = Path(os.environ["TPUCTL_CONFIG"])
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(text)


def test_tpu7x_has_no_public_price_and_says_so(cli, emulator) -> None:
    r = cli("create", "iron", "-a", "tpu7x-8", "--zone", ZONE)
    assert r.code == 0, r.err
    assert "no public price for tpu7x: its cost is not estimated" in r.err
    r = cli("list", "--zone", ZONE)
    assert r.code == 0, r.err
    (row,) = [ln for ln in r.out.splitlines() if ln.startswith("iron")]
    assert "~-" not in row
    assert r.err.count("no public price for tpu7x") == 1
    r = cli("describe", "iron", "--zone", ZONE)
    assert "no public price for tpu7x" in r.out
    assert cli("delete", "iron", "--zone", ZONE, "--yes").code == 0


def test_a_price_in_the_config_file_prices_tpu7x(cli, emulator) -> None:
    _config("[prices.tpu7x]\non_demand = 5.0\n")
    r = cli("create", "iron", "-a", "tpu7x-8", "--zone", ZONE)
    assert r.code == 0, r.err
    assert "tpu7x-8 on-demand: about $20.00/h" in r.err  # 4 chips at $5
    assert "tpu7x from your config file" in r.err
    r = cli("list", "--zone", ZONE, "--json")
    (node,) = json.loads(r.out)
    assert node["hourlyUsd"] == 20.0
    assert cli("delete", "iron", "--zone", ZONE, "--yes").code == 0


def test_a_spot_price_of_your_own_prices_spot_alone(cli, emulator) -> None:
    _config("[prices.tpu7x]\nspot = 1.0\n")
    r = cli("create", "iron", "-a", "tpu7x-8", "--zone", ZONE, "--spot")
    assert r.code == 0, r.err
    assert "tpu7x-8 spot: about $4.00/h" in r.err  # 4 chips at $1
    r = cli("prices", "tpu7x-8", "--json")
    (row,) = json.loads(r.out)["prices"]
    assert row["spotUsd"] == 4.0 and row["onDemandUsd"] is None  # not known: not guessed
    assert cli("delete", "iron", "--zone", ZONE, "--yes").code == 0
