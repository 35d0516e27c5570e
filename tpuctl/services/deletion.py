"""`tpuctl delete NAME...`: which names are nodes and which are queued requests, and deleting them.

A queued resource owns the node it made: deleting the request (with force) takes the node
with it, so such a node is deleted through its request and never on its own. A slice of a
multislice request is not deleted by its own name: that would delete every slice; the
request's name says so (docs/multislice.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tpuctl.cloud import registry
from tpuctl.errors import NotFoundError, UsageError
from tpuctl.models import DeleteResult
from tpuctl.services import locate, queued
from tpuctl.services.lookup import find_node
from tpuctl.services.nodes import delete_nodes

if TYPE_CHECKING:
    from tpuctl.cloud.backend import TpuBackend
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


def resolve(
    backends: Sequence[TpuBackend],
    target: Target,
    names: list[str],
    say: Callable[[str], None] = lambda line: None,
    elsewhere: bool = True,
) -> Doomed:
    """Look each name up as a node and as a queued request (a node's own, or of that name)
    on the one of `backends` that lists queued requests; a name neither is there is looked
    up as a node on the others, then in the other zones unless not `elsewhere`
    (services/locate.py: one node of that name there is deleted, `say`ing so; several are
    refused, naming their zones)."""
    api = registry.requests_api(backends)
    others = [b for b in backends if b is not api]
    found: list[Node] = []
    missing: list[str] = []
    requests: dict[str, QueuedResource] = {}
    slices_named: dict[str, QueuedResource] = {}  # slice node -> its request
    for name in dict.fromkeys(names):
        node: Node | None = None
        request: QueuedResource | None = None
        with contextlib.suppress(NotFoundError):
            node = api.get_node(f"{target.parent}/nodes/{name}")
        owner = (node.queued_resource if node else "") or queued.qr_name(target, name)
        with contextlib.suppress(NotFoundError):
            request = api.get_queued_resource(owner)
        if request is not None:
            requests[request.full_name] = request
            if node is not None and name != request.name and len(request.node_ids) > 1:
                slices_named[name] = request
        if node is not None and (request is None or node.name not in request.node_ids):
            found.append(node)
        if node is None and request is None and others:
            with contextlib.suppress(NotFoundError):
                node = find_node(others, f"{target.parent}/nodes/{name}")[1]
                found.append(node)
            owner = (node.queued_resource if node else "") or owner
            request = _request_on(others, owner)  # another API's multislice, or its slice's
            if request is not None:
                requests[request.full_name] = request
                if node is not None and name != request.name and len(request.node_ids) > 1:
                    slices_named[name] = request
                if node is not None and node.name in request.node_ids:
                    found.remove(node)
        if node is None and request is None:
            missing.append(name)
    if missing and elsewhere:  # looked for in the other zones: one list per API, on a miss
        matches = locate.elsewhere(backends, target, missing)
        for name in [m for m in missing if matches[m]]:
            node = locate.one_of(name, target, matches[name], NotFoundError(name))[1]
            say(locate.moved_note(node, target))
            missing.remove(name)
            request = _request_of(api, node)
            if request is None:
                found.append(node)
                continue
            requests[request.full_name] = request
            if name != request.name and len(request.node_ids) > 1:
                slices_named[name] = request
    for name, request in slices_named.items():
        if request.name not in names:
            index = request.node_ids.index(name) if name in request.node_ids else "?"
            raise UsageError(
                f"{name} is slice {index} of the "
                f"{registry.request_called(request, multislice=True)} {request.name} "
                f"({', '.join(request.node_ids)}): a slice is not deleted on its own",
                hint=f"delete every slice with "
                f"`tpuctl delete {request.name} --zone {request.zone}`",
            )
    return Doomed(found, list(requests.values()), missing)


def _request_on(backends: Sequence[TpuBackend], name: str) -> QueuedResource | None:
    """The queued request `name` on the first of `backends` that has it."""
    for backend in backends:
        with contextlib.suppress(NotFoundError):
            return backend.get_queued_resource(name)
    return None


def _request_of(api: TpuBackend, node: Node) -> QueuedResource | None:
    """The queued request that made `node` (None: it was made on its own)."""
    if not node.queued_resource:
        return None
    with contextlib.suppress(NotFoundError):
        return api.get_queued_resource(node.queued_resource)
    return None


def delete(
    backends: Sequence[TpuBackend],
    doomed: Doomed,
    *,
    wait: bool = True,
    progress: Callable[[str, str, float], None] | None = None,
    asked: Callable[[str], None] = lambda name: None,
    say: Callable[[str], None] = lambda line: None,
) -> list[DeleteResult]:
    """Delete the requests (with their nodes; each through its API), then the nodes, each
    through the backend that holds it; one result each, in that order. `asked(name)` once
    the cloud has a node's or a request's delete; `say`, what else was deleted (the free
    parts of a node someone else was deleting: `nodes.delete_nodes`)."""
    from tpuctl.cloud import registry

    def report(name: str) -> Callable[[str, float], None]:
        return lambda state, elapsed: progress(name, state, elapsed) if progress else None

    results = []
    for q in doomed.requests:
        holder = registry.holder(backends, q)
        results.append(queued.delete_queued(holder, q, wait=wait, progress=report(q.name)))
        asked(q.name)
    done: dict[int, DeleteResult] = {}
    for backend in backends:
        mine = [n for n in doomed.nodes if registry.holder(backends, n) is backend]
        if not mine:
            continue
        made = delete_nodes(
            backend,
            mine,
            wait=wait,
            progress=progress,
            asked=lambda node: asked(node.name),
            say=say,
        )
        done.update({id(n): r for n, r in zip(mine, made, strict=True)})
    return results + [done[id(n)] for n in doomed.nodes]
