"""Stop and start a single-host node (the TPU API stops only those)."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tpuctl.agent.labels import RAN, STARTED
from tpuctl.errors import Interrupted, TpuctlError, UsageError
from tpuctl.models import NODE_CREATE_FAILED, Node
from tpuctl.services import cost, locate, names, nodes
from tpuctl.waiting import Progress, noop

if TYPE_CHECKING:
    from tpuctl.cloud.backend import TpuBackend
    from tpuctl.config import Target

# verb -> (the state it leads to, the states it starts from, what it is doing)
VERBS = {
    "stop": ("STOPPED", {"READY"}, "stopping"),
    "start": ("READY", {"STOPPED"}, "starting"),
}


@dataclass
class PowerChange:
    node: Node
    already: bool  # it was in the wanted state: nothing was asked of the cloud


def change(
    api: TpuBackend | Sequence[TpuBackend],
    target: Target,
    name: str,
    verb: str,
    *,
    wait: bool = True,
    progress: Progress = noop,
    say: Callable[[str], None] = lambda line: None,
) -> PowerChange:
    """Stop or start `name`; with `wait`, until it is STOPPED or READY. A name not in the
    target's zone is looked for in the others (services/locate.py, `say`ing so)."""
    names.validate_name(name)
    backends = api if isinstance(api, Sequence) else (api,)
    api, node = locate.locate(backends, target, name, say)  # on the API and zone that have it
    target, full_name = target.in_zone(node.zone), node.full_name
    nodes.require_single_host(node, verb)
    want, allowed, doing = VERBS[verb]
    if node.state == want:
        return PowerChange(node, already=True)
    if node.state not in allowed and node.state not in {"STOPPING", "STARTING"}:
        raise UsageError(
            f"cannot {verb} {name}: it is {node.state}",
            hint=f"{verb} works on a {' or '.join(sorted(allowed))} node",
        )
    _record_run(api, node, verb)
    op = api.stop_node(full_name) if verb == "stop" else api.start_node(full_name)
    if not wait:
        return PowerChange(node, already=False)
    try:
        node = nodes.wait_for_state(
            api,
            full_name,
            {want},
            operation=op,
            progress=progress,
            fail_states=NODE_CREATE_FAILED,
        )
    except KeyboardInterrupt:
        raise Interrupted(f"stopped waiting; {name} is still {doing} in {target.zone}") from None
    return PowerChange(node, already=False)


def _record_run(api: TpuBackend, node: Node, verb: str) -> None:
    """Keep on the node how long it has run, so that its cost so far stays flat while it
    is stopped (services/cost.py): at a stop, the seconds it ran; at a start, the time."""
    if verb == "stop":
        ran = math.ceil(cost.ran_seconds(node) or 0)  # whole seconds: billing's unit
        changes: dict[str, str | None] = {RAN: str(ran)}
        changes[STARTED] = None
    else:
        changes = {STARTED: str(int(time.time()))}
    with contextlib.suppress(TpuctlError):  # only the estimate of its cost depends on it
        nodes.set_labels(api, node.full_name, changes)
