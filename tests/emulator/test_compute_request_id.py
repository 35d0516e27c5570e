"""Compute Engine's `requestId`, as Google's own client (google-cloud-compute) sends it:
a retried insert or delete with the same id gets the first request's operation and
does nothing again; a new id meets what the first made."""

from __future__ import annotations

import uuid

import pytest

from tests.emulator.test_compute_client import PROJECT, REGION, ZONE, _properties, clients

__all__ = ["clients"]  # the fixture, shared


def _insert(c, body, rid: str):  # noqa: ANN001, ANN202
    request = c.v1.InsertInstanceRequest(
        project=PROJECT, zone=ZONE, instance_resource=body, request_id=rid
    )
    return c.instances.insert_unary(request=request)


def _delete(c, name: str, rid: str):  # noqa: ANN001, ANN202
    request = c.v1.DeleteInstanceRequest(project=PROJECT, zone=ZONE, instance=name, request_id=rid)
    return c.instances.delete_unary(request=request)


def test_an_insert_repeated_with_its_request_id_gets_the_first_operation(clients, emulator) -> None:
    from google.api_core.exceptions import Conflict

    c, rid = clients, str(uuid.uuid4())
    body = c.v1.Instance(name="r1", **_properties(c, f"zones/{ZONE}/machineTypes/ct6e-standard-8t"))
    first = _insert(c, body, rid)
    again = _insert(c, body, rid)
    assert again.name == first.name and again.operation_type == "insert"
    assert len(emulator.instances()) == 1  # made once
    with pytest.raises(Conflict, match="already exists"):  # another request: refused
        _insert(c, body, str(uuid.uuid4()))
    rid = str(uuid.uuid4())
    gone = _delete(c, "r1", rid)
    c.zone_wait(gone)
    # the delete's retry, after it is done: its operation, not a 404
    again = _delete(c, "r1", rid)
    assert again.name == gone.name
    assert emulator.instances() == []


def test_a_policy_insert_repeated_with_its_request_id_gets_the_first_operation(
    clients, emulator
) -> None:
    c, rid = clients, str(uuid.uuid4())
    policy = c.v1.ResourcePolicy(name="wp", workload_policy=c.v1.ResourcePolicyWorkloadPolicy(
        type_="HIGH_THROUGHPUT", accelerator_topology="4x4"))  # fmt: skip
    request = c.v1.InsertResourcePolicyRequest(
        project=PROJECT, region=REGION, resource_policy_resource=policy, request_id=rid
    )
    ops = [c.policies.insert_unary(request=request) for _ in range(2)]
    assert ops[0].name == ops[1].name
    c.region_wait(c.policies.delete_unary(project=PROJECT, region=REGION, resource_policy="wp"))


def test_a_request_id_that_is_no_uuid_is_refused(clients, emulator) -> None:
    from google.api_core.exceptions import BadRequest

    c = clients
    body = c.v1.Instance(name="r2", **_properties(c, f"zones/{ZONE}/machineTypes/ct6e-standard-8t"))
    for bad in ("retry-1", "00000000-0000-0000-0000-000000000000"):
        with pytest.raises(BadRequest, match="requestId"):
            _insert(c, body, bad)
    assert emulator.instances() == []


def test_a_request_ids_operation_is_kept_an_hour_past_the_done_operations_cap() -> None:
    """Done operations are trimmed to the last 500, but one made with a requestId stays
    for at least 60 minutes (the reference's promise), then goes like the rest."""
    from tpuctl.emulator.compute import changes, transitions
    from tpuctl.emulator.compute.models import ZoneOperation
    from tpuctl.emulator.core.state import State
    from tpuctl.emulator.services import slots

    clock = [1_800_000_000.0]
    state = State(clock=lambda: clock[0], slots=slots())
    rid = str(uuid.uuid4())

    def noop(s: State, project: str) -> ZoneOperation:
        op = ZoneOperation.on(project, "zones", ZONE, "setLabels", "x", "1", s.now())
        op.succeed(s.now())
        transitions._keep(s, op)
        return op

    first = changes.once(state, rid, noop, PROJECT)
    for _ in range(transitions.MAX_DONE_OPERATIONS + 10):
        noop(state, PROJECT)
    assert changes.once(state, rid, noop, PROJECT) is first
    clock[0] += transitions.REQUEST_IDS_KEPT + 1
    noop(state, PROJECT)
    assert state.compute.by_request(PROJECT, rid) is None
