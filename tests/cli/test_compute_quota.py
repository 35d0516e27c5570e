"""Compute Engine's TPU quota, a pool apart from the Cloud TPU API's: shown by `quota`,
checked before a create, and enforced by the emulated Compute Engine itself."""

from __future__ import annotations

import json

from tests.emulator.test_gcloud import gcloud, gcloud_config

ZONE = "us-east1-d"
REGION = "us-east1"
FAMILY = "TPUS-PER-TPU-FAMILY-per-project-region"


def test_quota_shows_compute_engines_pool_and_what_uses_it(cli, emulator) -> None:
    assert cli("create", "b", "-a", "v6e-16", "--api", "compute", "--zone", ZONE).code == 0
    try:
        r = cli("quota", "--region", REGION)
        assert r.code == 0, r.err
        assert "Compute Engine TPU quota (a pool apart from the Cloud TPU API's" in r.out
        rows = [ln.split() for ln in r.out.splitlines() if FAMILY in ln]
        assert [REGION, FAMILY, "CT6E", "1024", "16"] in rows
        data = json.loads(cli("quota", "--region", REGION, "--json").out)
        (v6e,) = [q for q in data["compute"] if q["tpuFamily"] == "CT6E"]
        assert (v6e["limit"], v6e["inUse"], v6e["unit"]) == (1024, 16, "chips")
    finally:
        assert cli("delete", "b", "--zone", ZONE, "--yes").code == 0


def test_a_create_over_compute_engines_quota_is_refused_before_any_call(cli, emulator) -> None:
    emulator.config(quotas="new-project")  # 0 on-demand TPU chips on Compute Engine
    r = cli("create", "b", "-a", "v6e-8", "--api", "compute", "--zone", ZONE)
    assert r.code == 5, r.err  # a quota error, as on the Cloud TPU API
    assert (
        f"v6e-8 needs 8 chips of Compute Engine's {FAMILY} (tpu_family CT6E) in region "
        f"{REGION}: the limit is 0, 0 in use"
    ) in r.err
    assert "or use the Cloud TPU API (--api tpu)" in r.err
    assert "compute.instances.insert" not in str(emulator.requests())
    # spot counts against the preemptible quota, which a new project has
    r = cli("create", "s", "-a", "v6e-8", "--api", "compute", "--zone", ZONE, "--spot")
    assert r.code == 0, r.err
    assert cli("delete", "s", "--zone", ZONE, "--yes").code == 0


def test_compute_engine_itself_refuses_a_vm_over_quota(emulator) -> None:
    emulator.config(compute_quotas={f"{FAMILY}/CT6E": {REGION: 4}})
    gcloud_config(
        {
            "api_endpoint_overrides/compute": f"http://{emulator.address}/",
            "auth/disable_credentials": "true",
            "project": "p",
        }
    )
    r = gcloud("compute", "instances", "create", "big", "--zone", ZONE, "--machine-type",
               "ct6e-standard-8t", "--maintenance-policy", "TERMINATE")  # fmt: skip
    assert r.returncode != 0
    assert f"Quota 'TPUS_PER_TPU_FAMILY' exceeded.  Limit: 4.0 in region {REGION}." in r.stderr
    assert emulator.instances() == []
