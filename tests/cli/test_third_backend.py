"""A third TPU API plugs in as one package and one registry entry: `list`, `describe`,
`delete` and `gc --dry-run` work on its nodes through the same services and commands
(tests/backends/lab.py, registered for the test only)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.backends import lab
from tpuctl.cloud import registry
from tpuctl.models import CREATED, EXPIRES, MANAGED_BY, MANAGED_BY_VALUE, OWNER, Node
from tpuctl.services.names import owner_label

Z = "us-central1-a"
CALLER = "you@example.com"  # the emulator's caller


@pytest.fixture
def lab_nodes(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Node]]:
    """The lab registered after the Cloud TPU API and Compute Engine, with an empty store."""
    monkeypatch.setattr(registry, "KINDS", [*registry.KINDS, lab.KIND])
    monkeypatch.setattr(lab.LabTpus, "nodes", {})
    monkeypatch.setattr(lab.LabTpus, "deleted", [])
    yield lab.LabTpus.nodes


def _node(name: str, labels: dict[str, str]) -> Node:
    return Node(name, "tpuctl-demo", Z, "lab-8", "READY", labels=labels, api=lab.KIND.key)


def _ours(**more: str) -> dict[str, str]:
    # made by the emulator's caller (you@example.com), as tpuctl labels it
    labels = {
        MANAGED_BY: MANAGED_BY_VALUE,
        OWNER: owner_label(CALLER),
        CREATED: str(int(time.time())),
    }
    return {**labels, **more}


def test_list_and_describe_show_a_third_apis_nodes(cli, lab_nodes) -> None:  # noqa: ANN001
    bench = _node("bench", _ours())
    lab_nodes[bench.full_name] = bench
    assert cli("create", "beside", "-a", "v3-8", "--zone", Z).code == 0  # the Cloud TPU API's

    r = cli("list", "--zone", Z, "--json")
    assert r.code == 0, r.err
    rows = {row["name"]: row for row in json.loads(r.out)}
    assert (rows["bench"]["api"], rows["beside"]["api"]) == ("lab", "tpu")
    r = cli("list", "--zone", Z)
    assert r.code == 0, r.err
    assert any(
        line.split()[:1] == ["bench"] and "lab" in line.split() for line in r.out.splitlines()
    )

    r = cli("describe", "bench", "--zone", Z)
    assert r.code == 0, r.err
    assert "Lab TPUs" in r.out  # the API's title, from its registry entry
    assert cli("delete", "beside", "--zone", Z, "--yes").code == 0


def test_delete_goes_through_the_backend_that_holds_the_node(cli, emulator, lab_nodes) -> None:  # noqa: ANN001
    bench = _node("bench", _ours())
    lab_nodes[bench.full_name] = bench
    r = cli("delete", "bench", "--zone", Z, "--yes")
    assert r.code == 0, r.err
    assert lab.LabTpus.deleted == [bench.full_name] and lab_nodes == {}
    assert emulator.nodes() == []  # nothing was asked of the other APIs


def test_gc_plans_a_third_apis_expired_node_and_leaves_the_rest(cli, lab_nodes) -> None:  # noqa: ANN001
    past = str(int(time.time()) - 120)
    for node in (
        _node("expired", _ours(**{EXPIRES: past})),
        _node("fresh", _ours(**{EXPIRES: str(int(time.time()) + 3600)})),
        _node("theirs", {EXPIRES: past}),  # not tpuctl's: never gc's business
    ):
        lab_nodes[node.full_name] = node

    r = cli("gc", "--dry-run", "--json")
    assert r.code == 0, r.err
    planned = {row["name"]: row for row in json.loads(r.out)}
    assert planned["expired"]["action"] == "delete"
    assert planned["fresh"]["action"] == "keep"
    assert "theirs" not in planned
    assert sorted(n.name for n in lab_nodes.values()) == ["expired", "fresh", "theirs"]

    r = cli("gc", "--yes")
    assert r.code == 0, r.err
    assert sorted(n.name for n in lab_nodes.values()) == ["fresh", "theirs"]
    assert "deleted expired" in r.out


def test_the_bundle_carries_a_third_apis_agent_target(lab_nodes, tmp_path) -> None:  # noqa: ANN001
    """The lab's VM target (tests/backends/lab_vm.py, its `agent_module`) rides in the
    bundle as `targets/lab.py`, and the bundle's agent takes `--target lab:NAME` with no
    change to tpuctl/agent; without the lab registered the same bundle refuses it."""
    import ast
    import io
    import zipfile

    from tests.agent.conftest import checked
    from tpuctl.agent import bundle

    source = Path(lab.KIND.agent_module).read_bytes()
    ast.parse(source, feature_version=(3, 8))
    data = bundle.build()
    assert zipfile.ZipFile(io.BytesIO(data)).read("tpuctl_agent/targets/lab.py") == source
    path = tmp_path / "agent.pyz"
    path.write_bytes(data)

    def guard(target: str) -> str:
        done = subprocess.run(checked(path, "guard", "--target", target), capture_output=True,
                              text=True, cwd=tmp_path, timeout=60)  # fmt: skip
        assert done.returncode == 2, done.stderr  # argparse's refusal: nothing ran
        return done.stderr

    assert "the agent knows compute, lab, tpu (KIND:NAME)" in guard("nope:bench")
    assert "'lab:' names no node" in guard("lab:")  # the kind itself is known

    registry.KINDS.remove(lab.KIND)
    path.write_bytes(bundle.build())
    assert "unknown target kind 'lab'" in guard("lab:bench")
