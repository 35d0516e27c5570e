"""tpuctl quota request: an increase filed as a Cloud Quotas preference, shown by `quota`."""

from __future__ import annotations

import json

import pytest

from tests.cli.conftest import one_line_error

V6E = "TPUV6EPerProjectPerRegionForTPUAPI"


def test_a_request_is_filed_and_shown_pending(cli, emulator) -> None:
    emulator.quotas("new-project")
    r = cli(
        "quota", "request", V6E, "--value", "16", "--zone", "us-east5-b", "--justification", "x"
    )
    assert r.code == 0, r.err
    assert r.out.startswith(f"requested 16 chips of {V6E} in region us-east5, now 0 (tpuctl-")
    assert r.out.rstrip().endswith(": pending")
    shown = cli("quota", "--region", "us-east5")
    assert "quota increase requests" in shown.out
    row = next(ln for ln in shown.out.splitlines() if ln.startswith("tpuctl-"))
    assert row.split()[1:] == [V6E, "us-east5", "16", "0", "pending"]
    data = json.loads(cli("quota", "--region", "us-east5", "--json").out)
    assert [(q["quotaId"], q["state"]) for q in data["requests"]] == [(V6E, "pending")]


def test_a_decrease_is_refused_showing_both_values_unless_allowed(cli, emulator) -> None:
    # the emulator's default quotas: 256 chips of on-demand v6e in us-east5
    r = cli("quota", "request", V6E, "--value", "16", "--region", "us-east5")
    assert r.code == 2, r.err
    assert one_line_error(r) == (
        f"error: --value 16 is below the current limit of {V6E} in region us-east5 "
        "(256 chips): the request would lower the quota to 16"
    )
    assert "hint: ask for more than 256, or pass --allow-decrease to lower it" in r.err
    assert "POST quotaPreferences.create" not in emulator.requests()
    r = cli("quota", "request", V6E, "--value", "16", "--region", "us-east5", "--allow-decrease",
            "--json")  # fmt: skip
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert (data["preferredValue"], data["currentLimit"]) == (16, 256)
    r = cli("quota", "request", V6E, "--value", "512", "--region", "us-east5")
    assert r.code == 0, r.err
    assert f"requested 512 chips of {V6E} in region us-east5, now 16 (" in r.out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("NoSuchQuota", "--value", "8", "--region", "us-east5"), "invalid QUOTA_ID"),
        (
            ("TPUV5PPerProjectPerZoneForTPUAPI", "--value", "8", "--region", "us-east5"),
            "is per zone: pass --zone",
        ),
        ((V6E, "--value", "0", "--region", "us-east5"), "--value"),
        ((V6E, "--value", "8", "--region", "us-east5", "--zone", "us-east5-a"), "exclusive"),
        ((V6E, "--value", "8", "--region", "US EAST"), "invalid --region"),
    ],
)
def test_bad_input_is_one_line(cli, emulator, args, message) -> None:
    r = cli("quota", "request", *args)
    assert r.code == 2
    assert message in one_line_error(r)
    assert "POST quotaPreferences.create" not in emulator.requests()
