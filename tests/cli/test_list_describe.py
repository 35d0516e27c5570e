"""tpuctl list / describe."""

from __future__ import annotations

import json

from tests.cli.conftest import one_line_error


def test_list_zone_all_zones_and_json(cli) -> None:
    assert cli("create", "a1", "-a", "v3-8", "--zone", "us-central1-a").code == 0
    assert cli("create", "b1", "-a", "v4-8", "--zone", "us-central2-b").code == 0

    r = cli("list", "--zone", "us-central1-a")
    assert r.code == 0, r.err
    header, *rows = r.out.strip().splitlines()
    assert header.split() == [
        "NAME",
        "ZONE",
        "ACCELERATOR",
        "STATE",
        "HEALTH",
        "WORKERS",
        "AGE",
        "$/H",
        "COST",
        "OWNER",
        "UTIL",
        "IDLE",
        "EXPIRES",
    ]
    assert [row.split()[:4] for row in rows] == [["a1", "us-central1-a", "v3-8", "READY"]]
    assert rows[0].split()[7] == "$8.00"  # v3-8: 4 chips at $2.00 on demand
    assert "estimates from Cloud Billing prices of 2026-11-01" in r.err

    r = cli("list", "--all-zones", "--json")
    data = json.loads(r.out)
    assert [(n["name"], n["zone"]) for n in data] == [
        ("a1", "us-central1-a"),
        ("b1", "us-central2-b"),
    ]
    assert all(n["managed"] and n["owner"] for n in data)
    assert [n["hourlyUsd"] for n in data] == [8.0, 12.88]  # v3-8 and v4-8 list prices
    assert all(0 <= n["costSoFarUsd"] < 1 for n in data)
    assert [n["hourlyUsd"] for n in data] == [8.0, 12.88]  # v3-8 and v4-8 list prices
    assert all(0 <= n["costSoFarUsd"] < 1 for n in data)
    assert r.err == ""  # stdout is data only, stderr clean

    assert cli("delete", "a1", "--zone", "us-central1-a", "--yes").code == 0
    assert cli("delete", "b1", "--zone", "us-central2-b", "--yes").code == 0
    r = cli("list", "--all-zones")
    assert r.code == 0 and r.out == ""
    assert "no TPU nodes in any zone" in r.err


def test_describe_shows_workers_and_raw(cli) -> None:
    assert cli("create", "d1", "-a", "v5litepod-16", "--zone", "us-central1-a").code == 0
    r = cli("describe", "d1", "--zone", "us-central1-a")
    assert r.code == 0
    for w in range(4):
        assert f"worker {w}" in r.out
    assert "v2-alpha-tpuv5-lite" in r.out
    r = cli("describe", "d1", "--zone", "us-central1-a", "--json")
    data = json.loads(r.out)
    assert data["raw"]["apiVersion"] == "V2"
    assert len(data["workers"]) == 4
    assert cli("delete", "d1", "--zone", "us-central1-a", "--yes").code == 0


def test_describe_missing_is_exit_4(cli) -> None:
    r = cli("describe", "ghost", "--zone", "us-central1-a")
    assert r.code == 4
    assert "node 'ghost' in zone us-central1-a not found" in one_line_error(r)
