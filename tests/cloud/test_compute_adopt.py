"""A Compute Engine create that meets what its own lost first attempt made adopts it (by
tpuctl's labels and names, when the requestId that would have said so is not known any
more); what another create of that name made is a conflict, never adopted."""

from __future__ import annotations

import pytest

from tpuctl import catalog
from tpuctl.cloud.clients import ClientFactory
from tpuctl.errors import AlreadyExistsError
from tpuctl.models import CreateSpec
from tpuctl.services import node_create, nodes

PROJECT = "tpuctl-demo"


def _spec(name: str, shape: str, now: float) -> CreateSpec:
    return node_create.prepare(CreateSpec(name, catalog.shape(shape), owner="me"), now=now)


@pytest.mark.parametrize(
    ("shape", "zone"), [("tpu7x-8", "us-central1-c"), ("v6e-16", "us-east1-d")]
)
def test_a_create_meeting_its_own_parts_adopts_them_and_anothers_is_a_conflict(
    emulator, shape: str, zone: str
) -> None:
    api = ClientFactory().compute_tpu()
    parent = f"projects/{PROJECT}/locations/{zone}"
    ours = _spec("adopted", shape, 1_800_000_000)
    assert api.create_node(parent, ours) is not None
    assert api.create_node(parent, ours) is None  # the same create again: adopted
    with pytest.raises(AlreadyExistsError):  # a create of that name a second later
        api.create_node(parent, _spec("adopted", shape, 1_800_000_001))
    kinds = sorted(r["status"] for r in emulator.instances())
    assert kinds.count("INSTANCE_TEMPLATE") <= 1 and kinds.count("WORKLOAD_POLICY") <= 1
    api.delete_node(f"{parent}/nodes/adopted")
    nodes.wait_gone(api, f"{parent}/nodes/adopted")
    assert emulator.instances() == []
