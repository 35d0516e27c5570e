"""`tpuctl delete NAME...`: which names are nodes and which are queued requests, and deleting them.

A queued resource owns the node it made: deleting the request (with force) takes the node
with it, so such a node is deleted through its request and never on its own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tpuctl.errors import NotFoundError
from tpuctl.models import DeleteResult
from tpuctl.services import queued
from tpuctl.services.nodes import delete_nodes

if TYPE_CHECKING:
    from tpuctl.cloud.tpu import TpuApi
    from tpuctl.config import Target
    from tpuctl.models import Node, QueuedResource


@dataclass
class Doomed:
    """What a list of names stands for in one zone."""

    nodes: list[Node]  # nodes on their own (no request of theirs is being deleted)
    requests: list[QueuedResource]  # each deleted with its nodes
    missing: list[str]  # names that are neither

    @property
    def names(self) -> list[str]:
        """Every node and request to delete, once each, in the order found."""
        return list(dict.fromkeys([n.name for n in self.nodes] + [q.name for q in self.requests]))


def resolve(api: TpuApi, target: Target, names: list[str]) -> Doomed:
    """Look each name up as a node and as a queued request (a node's own, or of that name)."""
    found: list[Node] = []
    missing: list[str] = []
    requests: dict[str, QueuedResource] = {}
    for name in dict.fromkeys(names):
        node: Node | None = None
        request: QueuedResource | None = None
        with contextlib.suppress(NotFoundError):
            node = api.get_node(f"{target.parent}/nodes/{name}")
        owner = (node.raw.get("queuedResource") if node else None) or queued.qr_name(target, name)
        with contextlib.suppress(NotFoundError):
            request = api.get_queued_resource(owner)
        if request is not None:
            requests[request.full_name] = request
        if node is not None and (request is None or node.name not in request.node_ids):
            found.append(node)
        if node is None and request is None:
            missing.append(name)
    return Doomed(found, list(requests.values()), missing)


def delete(
    api: TpuApi,
    doomed: Doomed,
    *,
    wait: bool = True,
    progress: Callable[[str, str, float], None] | None = None,
) -> list[DeleteResult]:
    """Delete the requests (with their nodes), then the nodes; one result each, in that order."""

    def report(name: str) -> Callable[[str, float], None]:
        return lambda state, elapsed: progress(name, state, elapsed) if progress else None

    results = [
        queued.delete_queued(api, q, wait=wait, progress=report(q.name)) for q in doomed.requests
    ]
    return results + delete_nodes(api, doomed.nodes, wait=wait, progress=progress)
