"""What gc makes of what unfinished creates left of Compute Engine slices, from the lists
alone: which resources are tpuctl's (name, scope and description must all agree), which
are leftovers, and which of those it may delete (owner, keep, age)."""

from __future__ import annotations

from typing import Any

from tpuctl.cloud.compute import leftovers as compute_orphans
from tpuctl.cloud.compute.leftovers import GROUP, POLICY, TEMPLATE
from tpuctl.services import leftovers as gc_compute
from tpuctl.services.names import Owner

P = "projects/p"
NOW = 2_000_000_000.0
OLD = "2033-05-18T00:00:00.000-00:00"  # an hour and more before NOW


def _policy(name: str, slice_: str, zone: str, region: str = "us-east1") -> dict[str, Any]:
    return {"name": name, "region": f"https://x/compute/v1/{P}/regions/{region}",
            "description": f"tpuctl: workload policy of TPU slice {slice_} in {zone}",
            "creationTimestamp": OLD}  # fmt: skip


def _template(name: str, slice_: str, zone: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "region": f"https://x/compute/v1/{P}/regions/us-east1",
            "description": f"tpuctl: instance template of TPU slice {slice_} in {zone}",
            "properties": {"labels": labels}, "creationTimestamp": OLD}  # fmt: skip


def _pages(**kinds: list[dict[str, Any]]) -> compute_orphans.Pages:
    def pages(path: str, subject: str) -> list[dict[str, Any]]:
        kind = path.rsplit("/", 1)[-1]
        return [{"items": {"regions/us-east1": {kind: kinds.get(kind, [])}}}]

    return pages


MINE = {"managed-by": "tpuctl", "tpuctl-owner": "ann"}


def test_only_a_resource_whose_name_scope_and_description_agree_is_claimed() -> None:
    assert compute_orphans.claim(_policy("b-d-wp", "b", "us-east1-d"), POLICY) == (
        "b", "us-east1-d")  # fmt: skip
    assert compute_orphans.claim(_policy("c-d-wp", "b", "us-east1-d"), POLICY) is None  # name
    assert compute_orphans.claim(_policy("b-c-wp", "b", "us-east1-d"), POLICY) is None  # letter
    wrong_region = _policy("b-d-wp", "b", "us-east1-d", region="us-west1")
    assert compute_orphans.claim(wrong_region, POLICY) is None
    assert compute_orphans.claim(_policy("b-d-wp", "b", "us-east1-d"), TEMPLATE) is None
    foreign = {**_policy("b-d-wp", "b", "us-east1-d"), "description": "someone's"}
    assert compute_orphans.claim(foreign, POLICY) is None


def test_a_policy_claimed_with_or_without_the_owner_its_description_names() -> None:
    owned = _policy("b-d-wp", "b", "us-east1-d")
    owned["description"] += ", owned by tpuctl-owner=ann-0123456789ab"
    assert compute_orphans.claim(owned, POLICY) == ("b", "us-east1-d")
    for bad in (", owned by tpuctl-owner=Ann", ", owned by tpuctl-owner=", ", owned by x=ann"):
        assert compute_orphans.claim({**owned, "description": owned["description"].split(
            ",")[0] + bad}, POLICY) is None  # fmt: skip
    template = _template("b-d-it", "b", "us-east1-d", MINE)
    template["description"] += ", owned by tpuctl-owner=ann"  # only a policy names one
    assert compute_orphans.claim(template, TEMPLATE) is None
    (lo,) = compute_orphans.find(_pages(resourcePolicies=[owned]), "p")
    assert lo.labels == {"managed-by": "tpuctl", "tpuctl-owner": "ann-0123456789ab"}
    api: Any = object()
    mine = gc_compute.decide(lo, api, owner=Owner("ann-0123456789ab"), now=NOW)
    assert mine is not None and mine.delete
    assert gc_compute.decide(lo, api, owner=Owner("bob"), now=NOW) is None


def test_a_create_adopts_a_policy_of_its_name_unless_it_names_another_owner() -> None:
    from tpuctl import catalog
    from tpuctl.cloud.compute import slices
    from tpuctl.models import CreateSpec

    spec = CreateSpec("b", catalog.shape("v6e-16"), owner="ann-0123456789ab")
    body = slices.policy_body(spec, "us-east1-d")
    assert body["description"] == ("tpuctl: workload policy of TPU slice b in us-east1-d, "
                                   "owned by tpuctl-owner=ann-0123456789ab")  # fmt: skip
    assert slices.policy_owner(body) == "ann-0123456789ab"
    old = _policy("b-d-wp", "b", "us-east1-d")  # an older tpuctl's: no owner
    theirs = {**old, "description": body["description"].replace("ann-", "bob-")}
    made = [slices._made_by(found, POLICY, spec, "p", "us-east1-d")
            for found in (body, old, theirs)]  # fmt: skip
    assert made == [True, True, False]


def test_leftovers_and_what_gc_decides_of_each() -> None:
    found = compute_orphans.find(_pages(
        resourcePolicies=[_policy("a-d-wp", "a", "us-east1-d"), _policy("lone-d-wp", "lone",
                                                                        "us-east1-d")],
        instanceTemplates=[_template("a-d-it", "a", "us-east1-d", MINE),
                           _template("bob-d-it", "bob", "us-east1-d",
                                     {**MINE, "tpuctl-owner": "bob"}),
                           _template("kept-d-it", "kept", "us-east1-d",
                                     {**MINE, "tpuctl-keep": "true"}),
                           _template("theirs-d-it", "theirs", "us-east1-d", {"team": "x"})],
    ), "p")  # fmt: skip
    assert [(lo.slice, [p.kind for p in lo.parts]) for lo in found] == [
        ("a", [TEMPLATE, POLICY]), ("bob", [TEMPLATE]), ("kept", [TEMPLATE]),
        ("lone", [POLICY]), ("theirs", [TEMPLATE])]  # fmt: skip

    api: Any = object()
    decided = {lo.slice: gc_compute.decide(lo, api, owner=Owner("ann"), now=NOW) for lo in found}
    assert decided["a"] is not None and decided["a"].delete
    assert decided["bob"] is None  # another user's
    assert decided["theirs"] is None  # its template is not tpuctl's
    assert decided["kept"] is not None and not decided["kept"].delete
    lone = decided["lone"]
    assert lone is not None and not lone.delete and "--all-owners" in lone.reason
    everyone = gc_compute.decide(found[3], api, owner=None, now=NOW)
    assert everyone is not None and everyone.delete
    young = gc_compute.decide(found[0], api, owner=Owner("ann"), now=found[0].newest or 0.0)
    assert young is not None and not young.delete and "may be a create under way" in young.reason


def test_a_group_with_vms_or_coming_up_is_no_leftover() -> None:
    group = {
        "name": "g",
        "zone": f"{P}/zones/us-east1-d",
        "creationTimestamp": OLD,
        "description": "tpuctl: managed instance group of TPU slice g in us-east1-d",
    }
    vm = {
        "name": "g-abcd",
        "zone": f"{P}/zones/us-east1-d",
        "metadata": {
            "items": [
                {"key": "created-by", "value": f"{P}/zones/us-east1-d/instanceGroupManagers/g"}
            ]
        },
    }
    with_vm = compute_orphans.find(_pages(instanceGroupManagers=[group], instances=[vm]), "p")
    assert with_vm == []
    coming = {**group, "currentActions": {"creating": 4}}
    assert compute_orphans.find(_pages(instanceGroupManagers=[coming]), "p") == []
    (empty,) = compute_orphans.find(_pages(instanceGroupManagers=[group]), "p")
    assert empty.why == "its managed instance group has no VM left"
    assert [p.kind for p in empty.parts] == [GROUP]


class _Api:
    """Compute Engine as gc's collect sees it: the leftovers now, and the deletes."""

    api = "compute"

    def __init__(self, now: list[compute_orphans.Leftover]) -> None:
        self.now, self.deleted = now, []  # type: ignore[var-annotated]

    def leftovers(self, parent: str) -> list[compute_orphans.Leftover]:
        return self.now

    def delete_node(self, name: str) -> None:
        self.deleted.append(name)


def test_collect_reads_again_and_leaves_what_changed_since(tmp_path) -> None:  # noqa: ANN001
    (planned,) = compute_orphans.find(_pages(
        resourcePolicies=[_policy("a-d-wp", "a", "us-east1-d")],
        instanceTemplates=[_template("a-d-it", "a", "us-east1-d", MINE)]), "p")  # fmt: skip
    made_again = compute_orphans.Leftover(
        "p", "us-east1-d", "a", [planned.parts[0], compute_orphans.Part(POLICY, "a-d-wp", NOW)],
        planned.why, MINE)  # fmt: skip
    for now, result in (([made_again], "skipped: it changed since gc looked"),
                        ([], "skipped: no longer a leftover"), ([planned], "deleted")):  # fmt: skip
        api: Any = _Api(now)
        d = gc_compute.decide(planned, api, owner=Owner("ann"), now=NOW)
        assert d is not None and d.delete
        ((_, said),) = gc_compute.collect([d], project="p", log=tmp_path / "gc.log")
        assert said.startswith(result)
        assert api.deleted == ([planned.full_name] if result == "deleted" else [])
