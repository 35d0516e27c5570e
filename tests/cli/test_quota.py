"""tpuctl quota, and create stopped (or refused) for quota and capacity."""

from __future__ import annotations

import json
import re

import pytest

from tests.cli.conftest import one_line_error

V6E_SPOT = "TPUV6EPreemptiblePerProjectPerRegionForTPUAPI"
V3 = "TPUV3sPerProjectPerZoneForTPUAPI"


def rows(out: str) -> dict[tuple[str, str, str], list[str]]:
    """Table rows by (family, scheduling, per): [limit, in use, headroom, unit, used by]."""
    table: dict[tuple[str, str, str], list[str]] = {}
    for line in out.splitlines():
        cells = re.split(r"\s{2,}", line.strip())  # columns are two spaces apart at least
        if len(cells) == 8 and cells[0] != "FAMILY":
            table[(cells[0], cells[1], cells[2])] = cells[3:]
    return table


def test_usage_follows_creates_and_deletes(cli, emulator) -> None:
    for args in (
        ["a", "-a", "v6e-8", "--zone", "us-east5-b", "--spot"],
        ["b", "-a", "v6e-4", "--zone", "us-east5-a", "--preemptible"],
        ["c", "-a", "v5p-16", "--zone", "us-east5-a"],
        ["d", "-a", "v5litepod-16", "--zone", "us-east5-b"],
        ["e", "-a", "v5litepod-4", "--zone", "us-east5-b", "--spot"],
    ):
        assert cli("create", *args).code == 0
    r = cli("quota", "--region", "us-east5")
    assert r.code == 0, r.err
    table = rows(r.out)
    assert table[("v6e", "spot", "region")] == ["1024", "12", "1012", "chips", "a, b"]
    assert table[("v6e", "on-demand", "region")] == ["256", "0", "256", "chips", "-"]
    assert table[("v5p", "on-demand", "zone a")] == ["1024", "16", "1008", "cores", "c"]
    assert table[("v5e", "on-demand", "region")] == ["256", "16", "240", "chips", "d"]
    assert table[("v5e serving", "spot", "zone b")] == ["256", "4", "252", "chips", "e"]
    assert "request more: https://console.cloud.google.com/iam-admin/quotas?project=" in r.err
    assert cli("delete", "a", "--zone", "us-east5-b", "--yes").code == 0
    assert cli("delete", "c", "--zone", "us-east5-a", "--yes").code == 0
    r = cli("quota", "--zone", "us-east5-b", "--json")
    data = json.loads(r.out)
    assert data["regions"] == ["us-east5"] and data["limitsAvailable"] is True
    by_id = {(q["quotaId"], q["location"]): q for q in data["quotas"]}
    spot = by_id[(V6E_SPOT, "us-east5")]
    assert (spot["limit"], spot["inUse"], spot["headroom"], spot["nodes"]) == (1024, 4, 1020, ["b"])
    assert ("TPUV5PPerProjectPerZoneForTPUAPI", "us-east5-a") not in by_id  # --zone: zone b only
    assert cli("delete", "b", "--zone", "us-east5-a", "--yes").code == 0
    assert cli("delete", "d", "e", "--zone", "us-east5-b", "--yes").code == 0


def test_new_project_shows_what_it_has_and_what_it_lacks(cli, emulator) -> None:
    emulator.quotas("new-project")
    r = cli("quota", "--zone", "us-central1-a")
    assert r.code == 0, r.err
    table = rows(r.out)
    assert table[("v3", "on-demand", "zone a")] == ["16", "0", "16", "cores", "-"]
    assert table[("v3", "spot", "zone a")] == ["48", "0", "48", "cores", "-"]
    assert "no quota: v2 pod, v3 pod, v5e, v5e serving, v5p, v6e" in r.out
    r = cli("quota", "--all-regions")
    assert "us-central2  no quota for v4" in r.out


def test_create_over_quota_is_stopped_before_the_call(cli, emulator) -> None:
    emulator.quotas({V6E_SPOT: {"us-east5": 8}})
    assert cli("create", "first", "-a", "v6e-8", "--zone", "us-east5-b", "--spot").code == 0
    before = emulator.requests().get("POST create", 0)
    r = cli("create", "second", "-a", "v6e-4", "--zone", "us-east5-a", "--spot")
    assert r.code == 5
    assert one_line_error(r) == (
        f"error: quota exceeded: v6e-4 (spot) needs 4 chips of {V6E_SPOT}, which allows 8 in "
        "region us-east5; 8 in use by first v6e-8"
    )
    assert "delete one (`tpuctl delete first --zone us-east5-b`)" in r.err
    assert "create it on-demand (256 chips free in that quota here)" in r.err
    assert "try another region with v6e (us-central1, europe-west4, us-east1)" in r.err
    assert emulator.requests().get("POST create", 0) == before  # never asked the cloud
    r = cli("create", "second", "-a", "v6e-4", "--zone", "us-east5-a")  # on-demand fits
    assert r.code == 0, r.err
    assert cli("delete", "second", "--zone", "us-east5-a", "--yes").code == 0
    assert cli("delete", "first", "--zone", "us-east5-b", "--yes").code == 0


def test_no_quota_at_all(cli, emulator) -> None:
    emulator.quotas("new-project")
    r = cli("create", "big", "-a", "v4-32", "--zone", "us-central2-b")
    assert r.code == 5
    assert one_line_error(r) == (
        "error: quota exceeded: the project has no v4 on-demand quota in region us-central2 "
        "(TPUV4sPodPerProjectPerRegionForTPUAPI is 0), and v4-32 needs 16 chips"
    )
    assert "use --spot" not in r.err  # no spot quota either: no point suggesting it
    assert "ask for at least 16 chips of TPUV4sPodPerProjectPerRegionForTPUAPI" in r.err
    assert (
        "`tpuctl quota request TPUV4sPodPerProjectPerRegionForTPUAPI --value 16 "
        "--region us-central2`" in r.err
    )
    assert "POST create" not in emulator.requests()


def test_a_node_bigger_than_the_limit_is_not_told_to_delete_others(cli, emulator) -> None:
    emulator.quotas({V6E_SPOT: {"us-east5": 8}})
    assert cli("create", "small", "-a", "v6e-4", "--zone", "us-east5-b", "--spot").code == 0
    r = cli("create", "big", "-a", "v6e-16", "--zone", "us-east5-a", "--spot")
    assert r.code == 5
    assert "delete one" not in r.err  # 16 chips never fit under a limit of 8
    assert f"ask for at least 16 chips of {V6E_SPOT} in region us-east5" in r.err
    assert cli("delete", "small", "--zone", "us-east5-b", "--yes").code == 0


def test_cloud_refusal_reads_like_the_check(cli, emulator, caplog) -> None:
    """The quotas API is off, so tpuctl cannot check first: the cloud's 429 is explained."""
    emulator.config(quotas_api="disabled", quotas={V3: {"us-central1-a": 8}})
    assert cli("create", "one", "-a", "v3-8", "--zone", "us-central1-a").code == 0
    r = cli("create", "two", "-a", "v3-8", "--zone", "us-central1-a", "--debug")
    assert r.code == 5
    skipped = [r.getMessage() for r in caplog.records if r.name == "tpuctl.quota"]
    assert skipped == [
        f"quota check skipped: cannot read {V3}: the Cloud Quotas API "
        "(cloudquotas.googleapis.com) is disabled in project tpuctl-demo"
    ]
    r = cli("create", "two", "-a", "v3-8", "--zone", "us-central1-a")
    assert one_line_error(r, after_call=True) == (
        f"error: quota exceeded (the cloud refused the create): v3-8 (on-demand) needs 8 cores "
        f"of {V3}, which allows 8 in zone us-central1-a; 8 in use by one v3-8"
    )
    assert "use --spot (a separate quota)" in r.err
    assert emulator.requests()["POST create"] == 3  # asked each time, refused twice
    assert cli("delete", "one", "--zone", "us-central1-a", "--yes").code == 0


def test_no_capacity_is_not_a_quota_problem(cli, emulator) -> None:
    emulator.capacity({"us-east5-b": {"v6e": 8}})
    assert cli("create", "got", "-a", "v6e-8", "--zone", "us-east5-b", "--spot").code == 0
    r = cli("create", "late", "-a", "v6e-8", "--zone", "us-east5-b", "--spot")
    assert r.code == 5
    line = one_line_error(r, after_call=True)
    assert line.startswith("error: no capacity for late: the zone has no more of this TPU type")
    assert "not your quota" in line and 'no more capacity in the zone "us-east5-b"' in line
    assert "try another zone that offers it" in r.err
    assert [n["name"].rsplit("/", 1)[1] for n in emulator.nodes()] == ["got"]
    assert cli("delete", "got", "--zone", "us-east5-b", "--yes").code == 0


@pytest.mark.parametrize(
    ("mode", "needles"),
    [
        ("disabled", ["cloudquotas.googleapis.com) is disabled", "gcloud services enable"]),
        (
            "denied",
            [
                "permission cloudquotas.quotas.get denied in project tpuctl-demo",
                "roles/cloudquotas.viewer",
            ],
        ),
    ],
)
def test_quotas_api_unavailable_still_shows_usage(cli, emulator, mode, needles) -> None:
    assert cli("create", "used", "-a", "v3-8", "--zone", "us-central1-a", "--spot").code == 0
    emulator.config(quotas_api=mode)
    r = cli("quota", "--zone", "us-central1-a")
    assert r.code == 0, r.err
    assert rows(r.out) == {("v3", "spot", "zone a"): ["?", "8", "?", "cores", "used"]}
    assert "note: limits unknown, showing usage only" in r.err
    assert all(n in r.err for n in needles)
    data = json.loads(cli("quota", "--zone", "us-central1-a", "--json").out)
    assert data["limitsAvailable"] is False and data["quotas"][0]["limit"] is None
    assert cli("delete", "used", "--zone", "us-central1-a", "--yes").code == 0


def test_scope_flags_are_exclusive(cli) -> None:
    r = cli("quota", "--zone", "us-central1-a", "--all-regions")
    assert r.code == 2
    assert "exclusive" in one_line_error(r)


V6E_SPOT_ZONE = "TPUV6EPreemptiblePerProjectPerZoneForTPUAPI"


def test_zone_and_region_limits_are_shown_and_the_tightest_stops_a_create(cli, emulator) -> None:
    emulator.quotas({V6E_SPOT: {"us-east5": 16}, V6E_SPOT_ZONE: {"us-east5-b": 4}})
    assert cli("create", "a", "-a", "v6e-4", "--zone", "us-east5-b", "--spot").code == 0
    r = cli("quota", "--region", "us-east5")
    assert r.code == 0, r.err
    table = rows(r.out)
    assert table[("v6e", "spot", "region")] == ["16", "4", "12", "chips", "a"]
    assert table[("v6e", "spot", "zone b")] == ["4", "4", "0", "chips", "a"]
    assert table[("v6e", "spot", "zone a")] == ["1024", "0", "1024", "chips", "-"]
    r = cli("create", "b", "-a", "v6e-4", "--zone", "us-east5-b", "--spot")
    assert r.code == 5
    assert one_line_error(r) == (
        f"error: quota exceeded: v6e-4 (spot) needs 4 chips of {V6E_SPOT_ZONE}, which allows 4 "
        "in zone us-east5-b; 4 in use by a v6e-4"
    )
    assert emulator.requests()["POST create"] == 1  # the first one only
    assert cli("create", "b", "-a", "v6e-4", "--zone", "us-east5-a", "--spot").code == 0
    assert cli("delete", "a", "--zone", "us-east5-b", "--yes").code == 0
    assert cli("delete", "b", "--zone", "us-east5-a", "--yes").code == 0


def test_a_quota_the_api_does_not_return_is_named(cli, emulator, caplog) -> None:
    emulator.config(quotas_unlisted=[V6E_SPOT_ZONE])
    r = cli("quota", "--region", "us-east5")
    assert r.code == 0, r.err
    assert f"the Cloud Quotas API returned nothing for {V6E_SPOT_ZONE}" in r.err
    assert rows(r.out)[("v6e", "spot", "zone b")][0] == "?"
    data = json.loads(cli("quota", "--region", "us-east5", "--json").out)
    assert data["limitsMissing"] == [V6E_SPOT_ZONE]
    r = cli("create", "a", "-a", "v6e-4", "--zone", "us-east5-b", "--spot")
    assert r.code == 0, r.err
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warned == [
        f"warning: the Cloud Quotas API gives no limit for {V6E_SPOT_ZONE} in zone us-east5-b; "
        "the create is not checked against it"
    ]
    assert cli("delete", "a", "--zone", "us-east5-b", "--yes").code == 0


def test_a_refusal_naming_two_quotas_is_explained_by_the_one_tpuctl_knows(cli, emulator) -> None:
    emulator.config(quotas_api="disabled", quotas={V6E_SPOT: {"us-east5": 0}})
    emulator.quotas({V6E_SPOT_ZONE: {"us-east5-b": 0}})
    r = cli("create", "a", "-a", "v6e-4", "--zone", "us-east5-b", "--spot")
    assert r.code == 5
    assert one_line_error(r, after_call=True) == (
        "error: quota exceeded (the cloud refused the create): the project has no v6e spot quota "
        f"in region us-east5 ({V6E_SPOT} is 0), and v6e-4 needs 4 chips"
    )
