"""The TPU API's part of the state (`service.py`'s slots: `state.nodes`, `.operations`,
`.queued`, `.allocator`) and how nodes move through their transitions.

Invariants:
- Transitions run on wall-clock deadlines stored on each node and queued resource (so
  they survive a restart). They are applied by the backend calling `tick` and
  `queued.tick` at the start of every call, and by the server's ticker in between; each
  completes as of its deadline, not of when it was applied, so the state a caller sees
  depends on the clock alone, never on how often anyone looked.
- Whoever changes the state marks it dirty (`state.changed()`).
- The address allocator outlives a reset: an address is never handed out twice.
"""

from __future__ import annotations

from typing import Any

from tpuctl.emulator.core import errors
from tpuctl.emulator.core.slots import Slot
from tpuctl.emulator.core.state import State
from tpuctl.emulator.tpu import rules
from tpuctl.emulator.tpu.models import AddressAllocator, Node, Operation, QueuedResource

MAX_DONE_OPERATIONS = 500


def _loader(name: str, kind: Any) -> Any:
    """A slot's `load`: the state file's list of `kind`, by name."""

    def load(state: Any, config: dict[str, Any], kept: Any) -> None:
        setattr(state, name, {item.name: item for item in map(kind.from_state, kept or [])})

    return load


def _saver(name: str) -> Any:
    return lambda state: [item.to_state() for item in getattr(state, name).values()]


def _load_allocator(state: Any, config: dict[str, Any], kept: Any) -> None:
    state.allocator.next_index = (kept or {}).get("next_index", state.allocator.next_index)


# what the state file keeps, by name: nodes, operations, queued resources, and the
# allocator's place (kept over a reset too: an address is never handed out twice)
SLOTS = (
    Slot("nodes", dict, save=_saver("nodes"), load=_loader("nodes", Node)),
    Slot("operations", dict, save=_saver("operations"), load=_loader("operations", Operation)),
    Slot(
        "queued",
        dict,
        file_key="queued_resources",
        save=_saver("queued"),
        load=_loader("queued", QueuedResource),
    ),
    Slot(
        "allocator",
        AddressAllocator,
        save=lambda state: {"next_index": state.allocator.next_index},
        load=_load_allocator,
        reset=False,
    ),
)


# -- lookups ---------------------------------------------------------------------
def node(state: State, project: str, zone: str, node_id: str, permission: str) -> Node:
    rules.check_zone(project, zone, permission)
    return by_name(state, f"projects/{project}/locations/{zone}/nodes/{node_id}")


def by_name(state: State, name: str) -> Node:
    found: Node | None = state.nodes.get(name)
    if found is None:
        raise errors.not_found(name)
    return found


# -- node transitions ----------------------------------------------------------------
def tick(state: State, now: float) -> None:
    """Complete every node transition that is due."""
    for each in list(state.nodes.values()):
        if each.due(now):
            # as of when it was due, not of when someone looked
            complete(state, each, each.deadline if each.deadline is not None else now)


def _pending(state: State, target: str, verb: str | None) -> list[Operation]:
    return [
        op
        for op in state.operations.values()
        if not op.done and op.target == target and op.verb == verb
    ]


def complete(state: State, node: Node, now: float) -> None:
    """Complete the node's transition now, and the operations waiting on it."""
    verb = node.transition
    if verb in ("create", "start") and node.capacity_error:
        # The zone ran out: the operation fails with RESOURCE_EXHAUSTED; a create's
        # node never comes to be, a start's stays STOPPED.
        for op in _pending(state, node.name, verb):
            op.fail(now, errors.CODES["RESOURCE_EXHAUSTED"], node.capacity_error)
        if verb == "create":
            del state.nodes[node.name]
        else:
            node.transition, node.deadline, node.capacity_error = None, None, None
            node.state = "STOPPED"
        state.dirty = True
        return
    gone = node.finish()
    if gone:
        del state.nodes[node.name]
    elif node.state == "READY" and node.hostkeys_at is None:
        node.hostkeys_at = now + (state.durations["hostkeys"] or 0.0)
    for op in _pending(state, node.name, verb):
        op.succeed(now, None if gone else node)
    state.dirty = True


def begin(state: State, node: Node, verb: str, at: float | None = None) -> Operation:
    """Start the transition `verb` (aborting another under way); its operation.
    `at`: when it began, if before now (a queued resource provisioned while nobody
    asked), so that it is due as the clock says."""
    now = state.clock()
    start = now if at is None else at
    if node.transition != verb:
        for op in _pending(state, node.name, node.transition):
            message = f"The {op.verb} operation was aborted: the node is being {verb}d."
            op.fail(now, errors.CODES["ABORTED"], message)
        node.begin(verb, start, state.durations[verb])
    op = Operation.new(node.project, node.zone, node.name, verb, start)
    add_operation(state, op)
    if node.due(now):
        complete(state, node, node.deadline if node.deadline is not None else now)
    return op


def add_operation(state: State, op: Operation) -> None:
    """Keep `op`; only the newest MAX_DONE_OPERATIONS done ones are kept."""
    state.operations[op.name] = op
    done = [o for o in state.operations.values() if o.done]
    for old in sorted(done, key=lambda o: o.create_time)[: max(0, len(done) - MAX_DONE_OPERATIONS)]:
        del state.operations[old.name]
    state.dirty = True
