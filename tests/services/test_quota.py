"""The quota table, limits as the Cloud Quotas API reports them, usage, and check_create."""

from __future__ import annotations

import pytest

from tpuctl import catalog
from tpuctl.catalog import shape
from tpuctl.cloud.clients import ClientFactory
from tpuctl.cloud.quota import QuotaInfo
from tpuctl.cloud.tpu import quota_check, usage
from tpuctl.config import Target
from tpuctl.errors import QuotaError
from tpuctl.models import Node
from tpuctl.services import quota

V5P = "TPUV5PPerProjectPerZoneForTPUAPI"


@pytest.mark.parametrize(
    ("accelerator", "scheduling", "quota_id", "amount"),
    [
        ("v2-8", "on-demand", "TPUV2sPerProjectPerZoneForTPUAPI", 8),
        ("v2-32", "spot", "TPUV2sPreemptiblePodPerProjectPerRegionForTPUAPI", 32),
        ("v3-8", "preemptible", "TPUV3sPreemptiblePerProjectPerZoneForTPUAPI", 8),
        ("v4-32", "spot", "TPUV4sPreemptiblePodPerProjectPerRegionForTPUAPI", 16),
        ("v5litepod-8", "on-demand", "TPUV5sLitepodServingPerProjectPerZoneForTPUAPI", 8),
        ("v5litepod-16", "spot", "TPUV5sPreemptibleLitepodPerProjectPerRegionForTPUAPI", 16),
        ("v5p-16", "on-demand", V5P, 16),
        ("v6e-4", "spot", "TPUV6EPreemptiblePerProjectPerRegionForTPUAPI", 4),
    ],
)
def test_quota_table(accelerator, scheduling, quota_id, amount) -> None:
    acc = catalog.parse_accelerator(accelerator)
    assert acc is not None
    spec = catalog.quota_for(acc, scheduling)
    assert spec is not None and (spec.quota_id, spec.amount(acc)) == (quota_id, amount)
    assert spec.location("us-east5-b") == ("us-east5-b" if spec.dimension == "zone" else "us-east5")
    assert catalog.quota_for(acc, "reserved") is None


def test_every_family_has_both_schedulings_and_twins_in_the_other_dimension() -> None:
    assert len(catalog.QUOTAS_BY_ID) == len(catalog.QUOTAS) == 30
    for spec in catalog.QUOTAS:
        assert spec.quota_id.startswith("TPUV") and spec.quota_id.endswith("ForTPUAPI")
        assert ("Preemptible" in spec.quota_id) == spec.preemptible
        assert spec.metric.endswith("-preemptible") == spec.preemptible
        per = "PerProjectPerZone" if spec.dimension == "zone" else "PerProjectPerRegion"
        assert per in spec.quota_id
    for family in catalog.QUOTA_FAMILIES:
        for preemptible in (False, True):
            specs = [
                q for q in catalog.QUOTAS if (q.family, q.preemptible) == (family, preemptible)
            ]
            assert [q.primary for q in specs].count(True) == 1
            assert len({q.dimension for q in specs}) == len(specs)  # one per dimension
    # the ids public sources show (docs/quota.md gives each source)
    seen = {q.quota_id for q in catalog.QUOTAS if q.seen}
    assert {
        "TPUV6EPerProjectPerZoneForTPUAPI",
        "TPUV5sLitepodPerProjectPerZoneForTPUAPI",
        "TPUV5PPerProjectPerRegionForTPUAPI",
        "TPUV2sPodPerProjectPerRegionForTPUAPI",
        "TPUV2sPodPerProjectPerZoneForTPUAPI",
    } <= seen


def test_a_v6e_counts_against_its_region_and_its_zone() -> None:
    acc = catalog.parse_accelerator("v6e-8")
    assert acc is not None
    ids = [q.quota_id for q in catalog.quotas_for(acc, "spot")]
    assert ids == [
        "TPUV6EPreemptiblePerProjectPerRegionForTPUAPI",
        "TPUV6EPreemptiblePerProjectPerZoneForTPUAPI",
    ]
    assert catalog.quotas_for(acc, "reserved") == ()


def test_quota_info_from_api_json() -> None:
    info = QuotaInfo.from_api(
        {
            "quotaId": V5P,
            "dimensions": ["zone"],
            "dimensionsInfos": [
                {"dimensions": {"zone": "us-east5-a"}, "details": {"value": "128"}},
                {"dimensions": {"zone": "us-east5-c"}, "details": {}},  # zeroed
                {"details": {"value": "1536"}, "applicableLocations": ["us-east5-a", "us-east1-d"]},
            ],
        }
    )
    assert info.limit("us-east5-a") == 128
    assert info.limit("us-east5-c") == 0
    assert info.limit("us-east1-d") == 1536
    assert info.limit("europe-west4-b") is None  # the default does not apply there
    assert QuotaInfo.from_api({"quotaId": V5P}).limit("us-east5-a") is None


def _node(name: str, acc: str, zone: str, state: str = "READY", **sched: bool) -> Node:
    return Node(name=name, project="p", zone=zone, accelerator_type=acc, state=state, **sched)


def test_node_usage() -> None:
    (u,) = usage.node_usages(_node("a", "v5p-8", "us-east5-a", spot=True))[:1]
    assert (u.spec.quota_id, u.location, u.amount) == (
        "TPUV5PPreemptiblePerProjectPerZoneForTPUAPI",
        "us-east5-a",
        8,
    )
    both = usage.node_usages(_node("a", "v5p-8", "us-east5-a", spot=True))
    assert [(x.spec.dimension, x.location) for x in both] == [
        ("zone", "us-east5-a"),
        ("region", "us-east5"),
    ]
    assert usage.node_usages(_node("b", "v5p-8", "us-east5-a", state="DELETING")) == []
    assert usage.node_usages(_node("c", "v5p-8", "us-east5-a", reserved=True)) == []
    assert usage.node_usages(_node("d", "v99-8", "us-east5-a")) == []


def test_check_create_and_report_against_the_emulator(emulator) -> None:
    emulator.quotas({V5P: {"*": 0, "us-east5-a": 16}})
    factory = ClientFactory()
    tpu, quotas = factory.tpu(), factory.quotas()
    target = Target(project="p", zone="us-east5-a")
    quota_check.check_create(tpu, quotas, target, shape("v5p-16"), "on-demand")  # fits exactly
    with pytest.raises(QuotaError, match="the project has no v5p on-demand quota in zone us-"):
        quota_check.check_create(
            tpu, quotas, Target("p", "us-east5-b"), shape("v5p-8"), "on-demand"
        )
    from google.cloud import tpu_v2

    node = tpu_v2.Node(accelerator_type="v5p-8", runtime_version="v2-alpha-tpuv5")
    emulator.tpu_client().create_node(parent=target.parent, node_id="n", node=node).result()
    with pytest.raises(QuotaError) as exc:
        quota_check.check_create(tpu, quotas, target, shape("v5p-16"), "on-demand")
    assert (
        "needs 16 cores of TPUV5PPerProjectPerZoneForTPUAPI, which allows 16" in exc.value.message
    )
    assert "8 in use by n v5p-8" in exc.value.message
    quota_check.check_create(tpu, quotas, target, shape("v5p-16"), "spot")  # another quota
    quota_check.check_create(tpu, quotas, target, shape("v5p-16"), "reserved")  # not counted
    report = quota.report(tpu, quotas, "p", zone="us-east5-a")
    (row,) = [r for r in report.rows if r.spec.quota_id == V5P]
    assert (row.limit, row.in_use, row.headroom, row.location) == (16, 8, 8, "us-east5-a")
    emulator.tpu_client().delete_node(name=f"{target.parent}/nodes/n").result()


def test_refusal_naming_an_unknown_quota_keeps_the_clouds_words() -> None:
    error = QuotaError("quota exceeded: Quota 'TPUV7xPerProjectPerZoneForTPUAPI' exhausted.")
    explained = quota_check.explain_refusal(
        error, None, Target("p", "us-east5-a"), shape("v5p-8"), "spot"
    )  # type: ignore[arg-type]
    assert explained.message == (
        "quota exceeded (the cloud refused the create): "
        "Quota 'TPUV7xPerProjectPerZoneForTPUAPI' exhausted."
    )
    assert explained.hint and "tpuctl quota --zone us-east5-a" in explained.hint


def test_refusal_naming_another_familys_quota_is_not_rephrased() -> None:
    words = (
        "Quota limit 'TPUV6EPerProjectPerRegionForTPUAPI' has been exceeded. "
        "Limit: 0 in region us-east5."
    )
    error = QuotaError(f"quota exceeded: {words}")
    explained = quota_check.explain_refusal(
        error, None, Target("p", "us-east5-a"), shape("v5p-8"), "spot"
    )  # type: ignore[arg-type]
    assert explained.message == f"quota exceeded (the cloud refused the create): {words}"
