"""The control plane (`/_emulator/v1/...`) over a `State`: config, faults, advancing
transitions, preemption and guest attributes; the client is `client.EmulatorControl`.

Like `tpu.api`'s, these functions run with the facade's lock held.
"""

from __future__ import annotations

import random
import re
from dataclasses import asdict
from typing import Any

from tpuctl.emulator.compute import scheduling as compute_scheduling
from tpuctl.emulator.compute import transitions as compute_transitions
from tpuctl.emulator.control import maintenance
from tpuctl.emulator.core import errors
from tpuctl.emulator.core.errors import Faults
from tpuctl.emulator.core.state import State
from tpuctl.emulator.core.timestamps import proto_timestamp
from tpuctl.emulator.tpu import nodes as tpu_nodes
from tpuctl.emulator.tpu import queued
from tpuctl.emulator.tpu.models import Node


def draw_fault(state: State, target: str) -> tuple[float, int | None, bool, bool]:
    """For one API call to `target` (path and query): the delay to add, the HTTP status
    to fail with (or None), whether the failure comes after the call took effect, and
    whether a 429 is a quota error."""
    f = state.faults
    if f.paths and not re.search(f.paths, target):
        return f.delay, None, False, False
    if f.rate <= 0 or f.count == 0 or state.rng.random() >= f.rate:
        return f.delay, None, False, False
    if f.count is not None:
        f.count -= 1
    code = state.rng.choice(f.codes)
    return f.delay, code, state.rng.random() < f.after_rate, f.quota


def set_faults(state: State, body: dict[str, Any]) -> dict:
    state.faults = Faults.from_body(body)
    state.rng = random.Random(state.faults.seed)
    return asdict(state.faults)


def advance(state: State, node: str | None = None) -> dict:
    """Complete pending transitions now: of one node or Compute instance (by path), or of
    all (queued steps and instances too). One READY node whose guest has not published
    its SSH host keys yet (the `hostkeys` duration) publishes them now."""
    if node and node in state.compute.instances:
        # a flex-start VM waiting: capacity now; a preemption's notice: over now
        if compute_scheduling.advance(state, state.compute.instances[node]):
            return {"completed": [node]}
        # a host maintenance: its next phase now (control/maintenance.py)
        return {
            "completed": maintenance.advance(state, node)
            or compute_transitions.advance(state, node)
        }
    if node and maintenance.advance(state, node):
        return {"completed": [node]}
    targets = [tpu_nodes.by_name(state, node)] if node else list(state.nodes.values())
    now = state.now()
    done = []
    for target in targets:
        if target.transition is not None:
            done.append(target.name)
            tpu_nodes.complete(state, target, now)
        elif node and target.state == "READY" and (target.hostkeys_at or 0.0) > now:
            done.append(target.name)
            target.hostkeys_at = now
            state.changed()
    if not node:
        done += queued.advance(state, now)
        done += [
            i.path
            for i in list(state.compute.instances.values())
            if compute_scheduling.advance(state, i)
        ]
        done += compute_transitions.advance(state, None)
        done += maintenance.advance(state, None)
    return {"completed": done}


def all_nodes(state: State) -> list[Node]:
    return sorted(state.nodes.values(), key=lambda n: n.name)


def set_guest_attributes(state: State, node: str, worker: int, items: list[dict[str, str]]) -> dict:
    """Publish guest attributes (e.g. `hostkeys/ssh-ed25519`) on one worker of a node."""
    target = tpu_nodes.by_name(state, node)
    if not isinstance(worker, int) or not 0 <= worker < len(target.guest_attributes):
        raise errors.invalid_argument(f"worker {worker} is out of range")
    try:
        target.set_guest_attributes(worker, items)
    except (KeyError, TypeError):
        raise errors.invalid_argument("items are {namespace, key, value} objects") from None
    state.changed()
    return {"worker": worker, "items": target.guest_attributes[worker]}


# Node.state and Node.health values of the v2 API (tpu.v2.json); the control plane may
# set any of them, including those the emulator never reaches on its own.
NODE_STATES = (
    "CREATING",
    "READY",
    "RESTARTING",
    "REIMAGING",
    "DELETING",
    "REPAIRING",
    "STOPPED",
    "STOPPING",
    "STARTING",
    "PREEMPTED",
    "TERMINATED",
    "HIDING",
    "HIDDEN",
    "UNHIDING",
    "UNKNOWN",
)
HEALTH = ("HEALTHY", "TIMEOUT", "UNHEALTHY_TENSORFLOW", "UNHEALTHY_MAINTENANCE")
SYMPTOM_TYPES = (
    "LOW_MEMORY",
    "OUT_OF_MEMORY",
    "EXECUTE_TIMED_OUT",
    "MESH_BUILD_FAIL",
    "HBM_OUT_OF_MEMORY",
    "PROJECT_ABUSE",
)


def set_node_state(state: State, body: dict[str, Any]) -> Node:
    """Set a node's `state`, `health`, `healthDescription`, `symptoms` as the cloud might
    (a node under repair, terminated, hidden, unhealthy). A transition under way is
    dropped; only READY nodes serve SSH, so another state takes the workers down."""
    unknown = set(body) - {"node", "state", "health", "healthDescription", "symptoms"}
    if unknown or "node" not in body:
        raise errors.invalid_argument(
            "node-state takes node, state, health, healthDescription, symptoms"
        )
    target = tpu_nodes.by_name(state, str(body["node"]))
    new_state = body.get("state", target.state)
    health = body.get("health", target.health)
    if new_state not in NODE_STATES:
        raise errors.invalid_argument(f"state must be one of {list(NODE_STATES)}")
    if health not in ("", *HEALTH):
        raise errors.invalid_argument(f"health must be one of {list(HEALTH)} (or '')")
    symptoms = body.get("symptoms", target.symptoms)
    if not isinstance(symptoms, list) or not all(
        isinstance(s, dict) and s.get("symptomType") in SYMPTOM_TYPES for s in symptoms
    ):
        raise errors.invalid_argument(f"symptoms are {{symptomType: {list(SYMPTOM_TYPES)}, ...}}")
    now = proto_timestamp(state.now())  # Symptom.createTime, a Timestamp
    target.symptoms = [{"createTime": now, **{k: str(v) for k, v in s.items()}} for s in symptoms]
    if new_state != target.state:
        target.transition, target.deadline = None, None
        target.state = new_state
        if new_state == "READY" and target.hostkeys_at is None:
            target.hostkeys_at = state.now() + (state.durations["hostkeys"] or 0.0)
    target.health = health
    target.health_description = str(body.get("healthDescription", target.health_description))
    state.changed()
    return target


def preempt(state: State, node: str, notice: float | None = None) -> Node:
    """Preempt a READY spot or preemptible node, as the cloud may at any time: the notice
    first (`notice` seconds, the `preempt_notice` duration by default; 0: none), during
    which the node still answers READY, its guest's `instance/preempted` is TRUE and its
    processes get SIGTERM (workers/ssh.py); then PREEMPTED."""
    target = tpu_nodes.by_name(state, node)
    if not (target.scheduling.get("preemptible") or target.scheduling.get("spot")):
        raise errors.failed_precondition(f"Node {node} is neither spot nor preemptible.")
    if target.state != "READY" or target.transition is not None:
        busy = f", being {target.transition}ed" if target.transition else ""
        raise errors.failed_precondition(
            f"Node {node} is in state {target.state}{busy}, not READY."
        )
    number = isinstance(notice, (int, float)) and not isinstance(notice, bool)
    if notice is not None and not (number and 0 <= notice <= 3600):
        raise errors.invalid_argument("notice must be seconds between 0 and 3600")
    seconds = state.durations["preempt_notice"] if notice is None else float(notice)
    now = state.now()
    target.begin("preempt", now, seconds)
    if target.due(now):
        tpu_nodes.complete(state, target, now)
    state.changed()
    return target
