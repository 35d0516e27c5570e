"""The Cloud Quotas subset (through google-cloud-quotas), quota enforcement and capacity."""

from __future__ import annotations

import pytest
from google.api_core import exceptions as gx
from google.cloud import tpu_v2

from tpuctl import catalog
from tpuctl.catalog import runtime_for
from tpuctl.cloud.compute import quotas as compute_quotas
from tpuctl.emulator.control.client import ControlError, EmulatorControl
from tpuctl.emulator.core.server import EmulatorServer

SERVICE = "projects/p/locations/global/services/tpu.googleapis.com"
V6E_SPOT = "TPUV6EPreemptiblePerProjectPerRegionForTPUAPI"
V6E = "TPUV6EPerProjectPerRegionForTPUAPI"


def create(client, name, acc, zone, project="p", **sched):
    node = tpu_v2.Node(
        accelerator_type=acc,
        runtime_version=runtime_for(acc),
        scheduling_config=tpu_v2.SchedulingConfig(**sched),
    )
    parent = f"projects/{project}/locations/{zone}"
    return client.create_node(parent=parent, node_id=name, node=node).result(timeout=5)


def delete_all(emulator, client) -> None:
    emulator.durations(delete=0)
    emulator.advance()
    for node in emulator.nodes():
        client.delete_node(name=node["name"]).result(timeout=5)


def test_list_pages_through_every_tpu_quota(emulator) -> None:
    client = emulator.quotas_client()
    pager = client.list_quota_infos(request={"parent": SERVICE, "page_size": 5})
    infos = list(pager)
    assert [i.quota_id for i in infos] == [q.quota_id for q in catalog.QUOTAS]
    assert emulator.requests() == {"GET quotaInfos.list": 6}  # 30 quotas, 5 a page
    other = "projects/p/locations/global/services/storage.googleapis.com"
    assert list(client.list_quota_infos(parent=other)) == []
    # Compute Engine's TPU quotas, a pool of their own (quotas/compute.py)
    compute = "projects/p/locations/global/services/compute.googleapis.com"
    assert sorted({i.quota_id for i in client.list_quota_infos(parent=compute)}) == sorted(
        {q.quota_id for q in compute_quotas.QUOTAS}
    )


def test_get_quota_info_shape(emulator) -> None:
    emulator.quotas({V6E: {"*": 0, "us-east5": 8, "europe-west4": 0}})
    info = emulator.quotas_client().get_quota_info(name=f"{SERVICE}/quotaInfos/{V6E}")
    assert info.name.endswith(f"/locations/global/services/tpu.googleapis.com/quotaInfos/{V6E}")
    assert info.name.startswith("projects/") and info.name.split("/")[1].isdigit()
    assert (info.quota_id, info.metric) == (V6E, "tpu.googleapis.com/tpu-v6e")
    assert (info.service, list(info.dimensions)) == ("tpu.googleapis.com", ["region"])
    assert info.container_type.name == "PROJECT" and info.is_precise
    assert info.quota_display_name == "TPU v6e chips per project per region"
    first, default = info.dimensions_infos  # most specific first; a zero equals the default
    assert dict(first.dimensions) == {"region": "us-east5"}
    assert first.details.value == 8 and list(first.applicable_locations) == ["us-east5"]
    assert dict(default.dimensions) == {} and default.details.value == 0
    assert "us-central1" in default.applicable_locations
    with pytest.raises(gx.NotFound):
        emulator.quotas_client().get_quota_info(name=f"{SERVICE}/quotaInfos/NoSuchQuota")


def test_presets_and_config_validation(emulator) -> None:
    assert emulator.config()["quotas"][V6E] == {"*": 256}  # granted by default
    limits = emulator.quotas("new-project")
    assert limits["TPUV2sPerProjectPerZoneForTPUAPI"] == {"*": 16}
    assert limits["TPUV3sPreemptiblePerProjectPerZoneForTPUAPI"] == {"*": 48}
    assert limits[V6E] == limits[V6E_SPOT] == {"*": 0}
    assert emulator.quotas({V6E: 4, V6E_SPOT: {"us-east5": 8}})[V6E_SPOT] == {"*": 0, "us-east5": 8}
    for bad in (
        {"quotas": "huge"},
        {"quotas": {"NoSuchQuota": 1}},
        {"quotas": {V6E: -1}},
        {"capacity": {"us-east5-a": {"v9": 1}}},
        {"quotas_api": "maybe"},
        {"durations": {"create": 2}, "quotas": {V6E: "x"}},
    ):
        with pytest.raises(ControlError):
            emulator.config(**bad)
    config = emulator.config()
    assert config["quotas"][V6E] == {"*": 4} and config["durations"]["create"] == 0
    emulator.reset()
    assert emulator.config()["quotas"][V6E] == {"*": 256}


def test_create_over_quota_is_refused_as_the_cloud_does(emulator) -> None:
    emulator.quotas({V6E_SPOT: {"*": 0, "us-east5": 8}, V6E: 8})
    client = emulator.tpu_client()
    create(client, "s1", "v6e-8", "us-east5-b", spot=True)
    with pytest.raises(gx.TooManyRequests) as exc:
        # the same regional quota, from another zone, and preemptible counts like spot
        create(client, "s2", "v6e-8", "us-east5-a", preemptible=True)
    body = exc.value.response.json()["error"]  # type: ignore[union-attr]
    assert body["status"] == "RESOURCE_EXHAUSTED"
    assert (
        body["message"]
        == f"Quota limit '{V6E_SPOT}' has been exceeded. Limit: 8 in region us-east5."
    )
    (failure,) = body["details"]
    assert failure["@type"] == "type.googleapis.com/google.rpc.QuotaFailure"
    assert failure["violations"][0]["subject"].startswith("project:")
    assert failure["violations"][0]["description"] == (
        f"Quota '{V6E_SPOT}' exhausted. Limit 8 in region us-east5"
    )
    assert [n["name"].rsplit("/", 1)[1] for n in emulator.nodes()] == ["s1"]
    create(client, "d1", "v6e-8", "us-east5-b")  # on-demand is a quota of its own
    create(client, "s3", "v6e-8", "us-east5-b", project="other", spot=True)  # per project
    emulator.durations(delete=None)
    client.delete_node(name="projects/p/locations/us-east5-b/nodes/s1")  # DELETING: freed
    create(client, "s2", "v6e-8", "us-east5-a", spot=True)
    delete_all(emulator, client)


def test_units_and_families(emulator) -> None:
    emulator.quotas("new-project")
    emulator.quotas({"TPUV5PPerProjectPerZoneForTPUAPI": {"us-east5-a": 16}})
    emulator.quotas({"TPUV5sLitepodServingPerProjectPerZoneForTPUAPI": 8})
    client = emulator.tpu_client()
    create(client, "a", "v3-8", "us-central1-a")  # 8 of the 16 TensorCores per zone
    create(client, "b", "v3-8", "us-central1-a")
    with pytest.raises(gx.TooManyRequests, match="TPUV3sPerProjectPerZoneForTPUAPI.*zone us-cen"):
        create(client, "c", "v3-8", "us-central1-a")
    create(client, "c", "v3-8", "us-central1-f")  # another zone, another limit
    with pytest.raises(gx.TooManyRequests, match="TPUV3sPodPerProjectPerRegionForTPUAPI"):
        create(client, "pod", "v3-32", "us-central1-a")  # pods have quotas of their own
    create(client, "p", "v5p-16", "us-east5-a")  # 16 TensorCores (8 chips)
    with pytest.raises(gx.TooManyRequests, match="TPUV5PPerProjectPerZoneForTPUAPI"):
        create(client, "p2", "v5p-8", "us-east5-a")
    create(client, "e", "v5litepod-8", "us-east5-b")  # single-host v5e: the serving quota
    with pytest.raises(gx.TooManyRequests, match="TPUV5sLitepodPerProjectPerRegionForTPUAPI"):
        create(client, "e2", "v5litepod-16", "us-east5-b")
    create(client, "r", "v6e-8", "us-east5-b", reserved=True)  # reservations are not counted
    delete_all(emulator, client)


def test_no_capacity_fails_the_operation_and_leaves_no_node(emulator) -> None:
    assert emulator.capacity({"us-central1-a": {"v3": 4}}) == {"us-central1-a": {"v3": 4}}
    client = emulator.tpu_client()
    create(client, "first", "v3-8", "us-central1-a")  # 4 chips: the last ones
    with pytest.raises(gx.GoogleAPICallError) as exc:
        create(client, "second", "v3-8", "us-central1-a", spot=True)
    assert exc.value.grpc_status_code is not None
    assert exc.value.grpc_status_code.name == "RESOURCE_EXHAUSTED"
    assert 'There is no more capacity in the zone "us-central1-a"' in exc.value.message
    assert [n["name"].rsplit("/", 1)[1] for n in emulator.nodes()] == ["first"]
    create(client, "v5", "v5litepod-4", "us-central1-a")  # other generations are unaffected
    assert emulator.capacity({"us-central1-a": {"v3": None}}) == {}
    create(client, "second", "v3-8", "us-central1-a")
    delete_all(emulator, client)


@pytest.mark.parametrize(
    ("mode", "reason", "needle"),
    [
        ("disabled", "SERVICE_DISABLED", "Cloud Quotas API has not been used in project"),
        ("denied", "IAM_PERMISSION_DENIED", "Permission 'cloudquotas.quotas.get' denied"),
    ],
)
def test_quotas_api_switch(emulator, mode: str, reason: str, needle: str) -> None:
    emulator.config(quotas_api=mode)
    with pytest.raises(gx.Forbidden) as exc:
        emulator.quotas_client().get_quota_info(name=f"{SERVICE}/quotaInfos/{V6E}")
    assert exc.value.reason == reason and needle in exc.value.message
    with pytest.raises(gx.Forbidden):
        list(emulator.quotas_client().list_quota_infos(parent=SERVICE))
    create(emulator.tpu_client(), "still", "v3-8", "us-central1-a")  # TPU API unaffected
    delete_all(emulator, emulator.tpu_client())


def test_quota_config_survives_a_restart(tmp_path) -> None:
    server = EmulatorServer(port=0, state_dir=tmp_path).start()
    try:
        EmulatorControl(server.address).config(
            quotas={V6E: 8}, capacity={"us-east5-a": {"v6e": 16}}, quotas_api="denied"
        )
    finally:
        server.stop()
    again = EmulatorServer(port=0, state_dir=tmp_path).start()
    try:
        config = EmulatorControl(again.address).config()
    finally:
        again.stop()
    assert config["quotas"][V6E] == {"*": 8}
    assert config["capacity"] == {"us-east5-a": {"v6e": 16}}
    assert config["quotas_api"] == "denied"


def test_zone_and_region_quotas_are_both_enforced_and_both_named(emulator) -> None:
    zonal = "TPUV6EPreemptiblePerProjectPerZoneForTPUAPI"
    emulator.quotas({V6E_SPOT: {"us-east5": 8}, zonal: {"us-east5-b": 4}})
    client = emulator.tpu_client()
    with pytest.raises(gx.TooManyRequests) as exc:  # the zone is tighter than the region
        create(client, "big", "v6e-8", "us-east5-b", spot=True)
    body = exc.value.response.json()["error"]  # type: ignore[union-attr]
    assert (
        body["message"] == f"Quota limit '{zonal}' has been exceeded. Limit: 4 in zone us-east5-b."
    )
    create(client, "a", "v6e-4", "us-east5-b", spot=True)
    create(client, "b", "v6e-4", "us-east5-a", spot=True)  # the region is full now: 8 of 8
    emulator.quotas({V6E_SPOT: {"us-east5": 8}, zonal: {"us-east5-b": 4}})
    with pytest.raises(gx.TooManyRequests) as exc:  # both exceeded: one sentence, region first
        create(client, "c", "v6e-4", "us-east5-b", spot=True)
    body = exc.value.response.json()["error"]  # type: ignore[union-attr]
    assert body["message"] == (
        f"Quota limit '{V6E_SPOT},{zonal}' has been exceeded. "
        "Limit: 8,4 in region us-east5,zone us-east5-b."
    )
    (failure,) = body["details"]
    assert [v["description"] for v in failure["violations"]] == [
        f"Quota '{V6E_SPOT}' exhausted. Limit 8 in region us-east5",
        f"Quota '{zonal}' exhausted. Limit 4 in zone us-east5-b",
    ]
    delete_all(emulator, client)


def test_new_project_limits_come_from_the_primary_quotas(emulator) -> None:
    limits = emulator.quotas("new-project")
    assert limits["TPUV6EPerProjectPerZoneForTPUAPI"] == {"*": 256}  # the twin is not the limit
    assert limits[V6E] == {"*": 0}
    with pytest.raises(gx.TooManyRequests, match=f"'{V6E}'.*Limit: 0 in region us-east5"):
        create(emulator.tpu_client(), "x", "v6e-4", "us-east5-b")


def test_an_unlisted_quota_is_missing_from_the_api_but_still_enforced(emulator) -> None:
    zonal = "TPUV6EPerProjectPerZoneForTPUAPI"
    emulator.config(quotas_unlisted=[zonal], quotas={zonal: {"us-east5-b": 0}})
    client = emulator.quotas_client()
    ids = [i.quota_id for i in client.list_quota_infos(parent=SERVICE)]
    assert zonal not in ids and V6E in ids
    with pytest.raises(gx.NotFound):
        client.get_quota_info(name=f"{SERVICE}/quotaInfos/{zonal}")
    with pytest.raises(gx.TooManyRequests, match=zonal):
        create(emulator.tpu_client(), "x", "v6e-4", "us-east5-b")
    with pytest.raises(ControlError):
        emulator.config(quotas_unlisted=["NoSuchQuota"])
    emulator.reset()
    assert emulator.config()["quotas_unlisted"] == []


def test_a_zonal_twin_has_the_zone_dimension(emulator) -> None:
    zonal = "TPUV6EPerProjectPerZoneForTPUAPI"
    emulator.quotas({zonal: {"us-east5-b": 8}})
    info = emulator.quotas_client().get_quota_info(name=f"{SERVICE}/quotaInfos/{zonal}")
    assert (info.metric, list(info.dimensions)) == ("tpu.googleapis.com/tpu-v6e", ["zone"])
    assert info.quota_display_name == "TPU v6e chips per project per zone"
    first, default = info.dimensions_infos
    assert dict(first.dimensions) == {"zone": "us-east5-b"} and first.details.value == 8
    assert default.details.value == 256 and "us-east5-a" in default.applicable_locations
