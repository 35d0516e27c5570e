"""Nothing depends on the registry's order: list, describe, delete, gc, quota and create
on each API give the same results with `registry.KINDS` as declared and reversed, and a
third API's shape goes to the API that claims it, wherever that API is registered."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.backends import lab
from tpuctl.catalog import shape
from tpuctl.cloud import registry
from tpuctl.errors import CloudError
from tpuctl.models import Node

Z = "us-central1-a"  # v3-8 on the Cloud TPU API
CZ = "us-central1-c"  # tpu7x-8 on Compute Engine (TPU7x is Compute Engine's only)


@pytest.fixture(params=["declared", "reversed"])
def order(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The registry as declared, and reversed, with the lab registered too (empty)."""
    kinds = [*registry.KINDS, lab.KIND]
    monkeypatch.setattr(registry, "KINDS", kinds[::-1] if request.param == "reversed" else kinds)
    monkeypatch.setattr(lab.LabTpus, "nodes", {})
    monkeypatch.setattr(lab.LabTpus, "deleted", [])
    yield request.param


def _rows(cli) -> dict[str, dict]:  # noqa: ANN001
    r = cli("list", "--all-zones", "--json")
    assert r.code == 0, r.err
    return {row["name"]: row for row in json.loads(r.out)}


def test_each_api_creates_lists_describes_and_deletes_in_either_order(cli, emulator, order) -> None:  # noqa: ANN001
    assert cli("create", "old", "-a", "v3-8", "--zone", Z).code == 0
    r = cli("create", "iron", "-a", "tpu7x-8", "--zone", CZ)
    assert r.code == 0, r.err
    r = cli("create", "bench", "-a", "lab-8", "--zone", Z)  # claimed by the lab by name
    assert r.code == 0, r.err
    rows = _rows(cli)
    got = {n: (rows[n]["api"], rows[n]["kind"]) for n in ("old", "iron", "bench")}
    assert got == {"old": ("tpu", "node"), "iron": ("compute", "node"), "bench": ("lab", "node")}
    # on a Cloud TPU API node in the lab's own project, which the Cloud TPU API lists not
    assert {n["name"].rsplit("/", 1)[1]: n["name"].split("/")[1] for n in emulator.nodes()} == {
        "old": "tpuctl-demo",
        "bench": "tpuctl-demo-lab",
    }

    r = cli("describe", "iron", "--zone", CZ)
    assert r.code == 0 and "Compute Engine" in r.out, r.err
    r = cli("describe", "bench", "--zone", Z)
    assert r.code == 0 and "Lab TPUs" in r.out, r.err

    r = cli("gc", "--dry-run", "--json")
    assert r.code == 0, r.err
    planned = {row["name"]: row["action"] for row in json.loads(r.out)}
    assert {planned[n] for n in ("old", "iron", "bench")} == {"keep"}

    for name, zone in (("old", Z), ("iron", CZ), ("bench", Z)):
        r = cli("delete", name, "--zone", zone, "--yes")
        assert r.code == 0, r.err
    assert not {"old", "iron", "bench"} & set(_rows(cli))
    assert lab.LabTpus.deleted and emulator.nodes() == []


def test_quota_reports_the_same_in_either_order(cli, order) -> None:  # noqa: ANN001
    assert cli("create", "old", "-a", "v3-8", "--zone", Z).code == 0
    r = cli("quota", "--region", "us-central1", "--json")
    assert r.code == 0, r.err
    report = json.loads(r.out)
    used = {q["quotaId"]: q["inUse"] for q in report["quotas"] if q["inUse"]}
    assert used and all(n == 8 for n in used.values())  # v3-8's cores, on the TPU API's pool
    assert "compute" in report  # Compute Engine's own pool, from its adapter
    assert cli("delete", "old", "--zone", Z, "--yes").code == 0


def test_a_shape_goes_to_the_api_that_claims_it_never_to_the_first(order) -> None:  # noqa: ANN001
    assert registry.preferred(shape("lab-8")).key == "lab"  # claimed by name
    assert registry.preferred(shape("v99-8")).key == "tpu"  # the judge of unknown names
    assert registry.preferred(shape("v6e-8")).key == "tpu"  # shared: the higher preference
    assert registry.preferred(shape("tpu7x-8")).key == "compute"  # offered by one
    assert registry.preferred().key == "tpu"


def test_holder_refuses_a_node_no_api_holds(order) -> None:  # noqa: ANN001
    backends = [k.build(None) for k in registry.KINDS if k is lab.KIND]
    node = Node("stray", "p", Z, "v3-8", "READY", api="elsewhere")
    with pytest.raises(CloudError, match="stray is held by API 'elsewhere'"):
        registry.holder(backends, node)
    assert (
        registry.holder(backends, Node("b", "p", Z, "lab-8", "READY", api="lab")).kind.key == "lab"
    )
