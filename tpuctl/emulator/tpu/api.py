"""The Cloud TPU v2 `nodes` and `operations` methods, over a `State`.

Each function is one API method: it checks the request with `rules`, changes the state
and answers the resource (`models`), which the front (`front.py`) renders as REST JSON.
The caller (the facade) holds the lock and has applied the transitions that were due.
"""

from __future__ import annotations

from typing import Any

from tpuctl.emulator.core import errors
from tpuctl.emulator.core.state import State
from tpuctl.emulator.tpu import nodes as tpu_nodes
from tpuctl.emulator.tpu import rules
from tpuctl.emulator.tpu.models import TRANSITIONS, Node, Operation, Page


def _held(state: State, node: Node) -> int:
    """The chips Compute Engine instances hold in the node's zone and generation."""
    return state.compute.chips_in_use(node.zone, node.accelerator.generation)


def create_node(
    state: State, project: str, zone: str, node_id: str, body: dict[str, Any]
) -> Operation:
    rules.check_zone(project, zone, "tpu.nodes.create")
    body = rules.check_fields("Node", body, "node")
    state.policies.check_create(project, zone, [body], "a TPU node")
    name = f"projects/{project}/locations/{zone}/nodes/{node_id}"
    if node_id and name in state.nodes:
        raise errors.already_exists(name)
    node = rules.new_node(project, zone, node_id, body, state.now(), state.allocator)
    node.capacity_error = state.quota.admit(node, state.nodes.values(), _held(state, node))
    state.nodes[name] = node
    return tpu_nodes.begin(state, node, "create")


def get_node(state: State, project: str, zone: str, node_id: str) -> Node:
    return tpu_nodes.node(state, project, zone, node_id, "tpu.nodes.get")


def list_nodes(state: State, project: str, zone: str, page_size: int, page_token: str) -> Page:
    rules.check_zone(project, zone, "tpu.nodes.list", any_zone=True)
    nodes = rules.in_location(state.nodes.values(), project, zone)
    return Page(*rules.page(nodes, page_size, page_token))


def delete_node(state: State, project: str, zone: str, node_id: str) -> Operation:
    node = tpu_nodes.node(state, project, zone, node_id, "tpu.nodes.delete")
    return tpu_nodes.begin(state, node, "delete")


def power(
    state: State, project: str, zone: str, node_id: str, verb: str, body: dict[str, Any]
) -> Operation:
    """`stop` or `start` a single-host node. A start needs the zone's capacity again (a
    stopped node holds none): without it, the operation ends with error code 8."""
    node = tpu_nodes.node(state, project, zone, node_id, f"tpu.nodes.{verb}")
    rules.check_fields(f"{verb.capitalize()}NodeRequest", body, "")
    acc = node.accelerator
    if acc.multi_host:
        raise errors.failed_precondition(
            f"Cloud TPU received a bad request. {verb.capitalize()} is only available with "
            f"single TPU nodes: {node.name} is a {acc.name} slice of {acc.workers} workers."
        )
    if not node.may_begin(verb):
        wanted = " or ".join(TRANSITIONS[verb].allowed_from or ())
        done = "stopped" if verb == "stop" else "started"
        raise errors.failed_precondition(
            f"Node {node.name} is in state {node.state}: only a node in state {wanted} "
            f"can be {done}."
        )
    if verb == "start":
        others = [n for n in state.nodes.values() if n is not node]
        node.capacity_error = state.quota.admit(node, others, _held(state, node))
    return tpu_nodes.begin(state, node, verb)


def update_node(
    state: State, project: str, zone: str, node_id: str, update_mask: str, body: dict[str, Any]
) -> Operation:
    node = tpu_nodes.node(state, project, zone, node_id, "tpu.nodes.update")
    body = rules.check_fields("Node", body, "node")
    paths = rules.update_paths(update_mask)
    if node.state == "DELETING":
        raise errors.failed_precondition(f"Node {node.name} is being deleted.")
    if node.state in ("PREEMPTED", "TERMINATED"):
        # Code 3 and this wording as SkyPilot's failover handler quotes the cloud's answer
        # for PREEMPTED (shared/reference/tpu-facts.md); TERMINATED is refused alike (guessed).
        raise errors.bad_request(f"update is not supported while in state {node.state}")
    rules.apply_update(node, paths, body)
    now = state.now()
    op = Operation.new(node.project, node.zone, node.name, "update", now)
    op.succeed(now, node)
    tpu_nodes.add_operation(state, op)
    return op


def get_guest_attributes(
    state: State, project: str, zone: str, node_id: str, body: dict[str, Any]
) -> tuple[str, list[list[dict[str, str]]]]:
    """The query path, and the entries under it on each worker asked for, in order."""
    node = tpu_nodes.node(state, project, zone, node_id, "tpu.nodes.get")
    body = rules.check_fields("GetGuestAttributesRequest", body, "")
    query_path = str(body.get("queryPath") or "")
    now = state.now()
    workers = rules.worker_ids(body, node.accelerator.workers)
    return query_path, [node.query_guest_attributes(w, query_path, now) for w in workers]


def get_operation(state: State, project: str, zone: str, op_id: str) -> Operation:
    rules.check_zone(project, zone, "tpu.operations.get")
    name = f"projects/{project}/locations/{zone}/operations/{op_id}"
    op = state.operations.get(name)
    if op is None:
        raise errors.not_found(name)
    return op


def list_operations(state: State, project: str, zone: str, page_size: int, page_token: str) -> Page:
    rules.check_zone(project, zone, "tpu.operations.list", any_zone=True)
    ops = rules.in_location(
        state.operations.values(), project, zone, order=lambda o: (o.create_time, o.name)
    )
    return Page(*rules.page(ops, page_size, page_token))
