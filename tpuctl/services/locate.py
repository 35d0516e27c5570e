"""A node asked for by name in a zone it is not in: found in the others.

A name missing from the zone in use (`--zone`, or the default) is looked for in every
zone with one aggregated list per API (`projects/P/locations/-` on the Cloud TPU API,
`aggregated/instances` on Compute Engine), asked only on such a miss: a hit costs
nothing more than before. One node of that name elsewhere is used, and the caller says
which zone; several are named, with the `--zone` that picks each.

The TPU API's `locations/-` wildcard (`tpuctl list --all-zones` uses it too) is not in
the API's reference, but public code lists with it and ListNodesResponse has
`unreachable` for the zones it could not read. Should a project's list of every zone be
refused, the miss is reported as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from tpuctl.errors import NotFoundError, TpuctlError
from tpuctl.services.lookup import find_node

if TYPE_CHECKING:
    from tpuctl.cloud.backend import TpuBackend
    from tpuctl.config import Target
    from tpuctl.models import Node

Found = tuple["TpuBackend", "Node"]


def elsewhere(
    backends: Sequence[TpuBackend], target: Target, names: Sequence[str]
) -> dict[str, list[Found]]:
    """Each of `names` -> the nodes of that name in the project's other zones, with their
    API's adapter. An API that cannot list every zone (off, no permission) adds none."""
    wanted = set(names)
    found: dict[str, list[Found]] = {name: [] for name in names}
    for api in backends:
        try:
            listed = api.list_nodes(f"projects/{target.project}/locations/-")
        except TpuctlError:
            continue
        for node in listed:
            if node.name in wanted and node.zone != target.zone:
                found[node.name].append((api, node))
    return found


def one_of(name: str, target: Target, matches: list[Found], missing: NotFoundError) -> Found:
    """The one match; `missing` (the error of the zone in use) when there is none; with
    several, a NotFoundError naming their zones and how to choose."""
    if not matches:
        raise missing
    if len(matches) == 1:
        return matches[0]
    zones = sorted({node.zone for _, node in matches})
    raise NotFoundError(
        f"node {name!r} is not in zone {target.zone}, and nodes of that name are in zones "
        f"{', '.join(zones)}",
        hint="choose one: " + " or ".join(f"--zone {z}" for z in zones),
    )


def moved_note(node: Node, target: Target) -> str:
    """What a command says when it works on a node outside the zone in use."""
    return f"{node.name} is in zone {node.zone}, not {target.zone}: using it"


def locate(
    backends: Sequence[TpuBackend],
    target: Target,
    name: str,
    say: Callable[[str], None] = lambda line: None,
) -> Found:
    """The node `name` in the target's zone (on the first API that has it, `find_node`);
    when none has it there, the one node of that name in another zone, `say`ing so."""
    try:
        return find_node(backends, f"{target.parent}/nodes/{name}")
    except NotFoundError as missing:
        api, node = one_of(name, target, elsewhere(backends, target, [name])[name], missing)
    say(moved_note(node, target))
    return api, node
