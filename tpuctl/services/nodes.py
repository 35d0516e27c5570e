"""Node lifecycle: the checks of what a node asks for (its accelerator, version,
scheduling, scopes), waiting for a state, labels, deleting. The create itself (its spec
validated and prepared) is services/node_create.py's.

Services receive a `TpuBackend` (the adapter) and report progress through a callback;
they never print and never know which endpoint is behind the adapter.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import TYPE_CHECKING

from tpuctl import catalog
from tpuctl.concurrency import each
from tpuctl.errors import (
    CloudError,
    NotFoundError,
    TpuctlError,
    UsageError,
)
from tpuctl.models import (
    CreateSpec,
    DeleteResult,
    Node,
)
from tpuctl.services.names import validate_labels
from tpuctl.waiting import Progress, noop, poll_until

if TYPE_CHECKING:
    from tpuctl.catalog import SliceShape
    from tpuctl.cloud.backend import TpuBackend
    from tpuctl.config import Target


def _suggest(wanted: str, offered: list[str]) -> str:
    close = difflib.get_close_matches(wanted, offered, n=3, cutoff=0.5)
    return f"did you mean {', '.join(close)}?" if close else ""


def check_accelerator(api: TpuBackend, target: Target, shape: SliceShape) -> None:
    """Refuse a slice the API does not offer in the target zone (a type only another API
    offers is refused before any call, naming that API)."""
    from tpuctl.cloud import registry

    if shape.known and not api.type_name(shape):
        offering = registry.offering(shape)
        others = " or ".join(k.called for k in offering)
        flag = f" ({offering[0].flag})" if offering else ""
        raise UsageError(
            f"accelerator type {shape.name!r} is offered only through {others}{flag}, not "
            f"{api.kind.called}",
            hint="see docs/compute-engine.md for which API offers which TPU",
        )
    offered = api.accelerator_types(target.parent)
    wanted = api.type_name(shape) or shape.name
    if wanted in offered:
        return
    if not shape.known:
        _unknown_type(shape.name, target.zone)
    hints = [_suggest(wanted, offered)]
    if shape.known:
        elsewhere = catalog.zones_offering(shape.generation)
        if elsewhere:
            hints.append(f"{shape.name} is offered in {', '.join(elsewhere[:4])} (--zone).")
    raise UsageError(
        f"accelerator type {wanted!r} is not offered in zone {target.zone}",
        hint=" ".join(h for h in hints if h)
        or f"see the types with `gcloud compute tpus accelerator-types list --zone {target.zone}`",
    )


def _unknown_type(name: str, zone: str) -> None:
    """A type neither the zone nor the catalogue has, like a known one of the same
    generation (`v4-8x`): refused naming that one and where it is offered."""
    # a known type behind a word before it (`tpu-v4-8`: v4-8, not the zone's v3-8)
    inner = [
        name[i + 1 :] for i, c in enumerate(name) if c == "-" and name[i + 1 :] in catalog.SHAPES
    ]
    family = name.split("-", 1)[0] + "-"  # of the generation typed: v4-8x, not v9-8
    same = [known for known in catalog.SHAPES if known.startswith(family)]
    like = inner[:1] or difflib.get_close_matches(name, same, n=1, cutoff=0.6)
    if not like:
        return
    near = catalog.shape(like[0])
    zones = catalog.zones_offering(near.generation)
    where = [zone] if zone in zones else zones[:4]
    # No zone known to offer it (a type the zone list does not cover): no "offered in".
    hint = f"{near.name} is offered in {', '.join(where)}" if where else None
    raise UsageError(
        f"unknown accelerator type {name!r}: did you mean {near.name}?",
        hint=hint and hint + ("" if zone in zones else " (--zone)"),
    )


def check_version(api: TpuBackend, target: Target, version: str) -> None:
    offered = api.runtime_versions(target.parent)
    if version not in offered:
        raise UsageError(
            f"runtime version {version!r} is not offered in zone {target.zone}",
            hint=_suggest(version, offered) or f"offered: {', '.join(sorted(offered)[:8])}, ...",
        )


def check_scheduling(spec: CreateSpec) -> None:
    """One kind of capacity at a time, on every API: spot, preemptible or reserved."""
    given = [
        flag
        for flag, on in (("--spot", spec.spot), ("--preemptible", spec.preemptible))
        + (("--reserved", spec.reserved),)
        if on
    ]
    if len(given) > 1:
        raise UsageError(f"{' and '.join(given)} are exclusive: choose one")


_SCOPE_PREFIX = "https://www.googleapis.com/auth/"


def parse_scopes(values: list[str]) -> list[str]:
    """OAuth scopes from `--scopes a,b` (repeatable): full URLs, or names under
    https://www.googleapis.com/auth/ (`cloud-platform`)."""
    scopes = [v.strip() for value in values for v in value.split(",") if v.strip()]
    if values and not scopes:
        raise UsageError(
            f"invalid --scopes {values[0]!r}: give one or more scopes, e.g. cloud-platform "
            "(leave --scopes out for the default)"
        )
    for scope in scopes:
        if "://" in scope and not scope.startswith("https://"):
            raise UsageError(f"invalid --scopes {scope!r}: an https:// URL or a name")
    return [s if s.startswith("https://") else _SCOPE_PREFIX + s for s in scopes]


def wait_for_state(
    api: TpuBackend,
    name: str,
    until: frozenset[str] | set[str],
    *,
    operation: str | None = None,
    fail_states: frozenset[str] | set[str] = frozenset(),
    progress: Progress = noop,
    timeout: float = 3600.0,
) -> Node:
    """Poll until the node reaches a state in `until`; raise on failure or timeout."""
    subject = name.rsplit("/", 1)[-1]
    op_done = operation is None

    def check() -> tuple[Node | None, str]:
        nonlocal op_done
        if not op_done and operation:
            status = api.operation_status(operation, subject)
            if status.error:
                raise status.error
            op_done = status.done
        try:
            node = api.get_node(name)
        except NotFoundError:
            if op_done:
                raise
            return None, "PENDING"
        if node.state in fail_states:
            raise CloudError(
                f"node {subject} went to {node.state} instead of {'/'.join(sorted(until))}"
                + (f": {node.health_description}" if node.health_description else "")
            )
        return (node if node.state in until else None), node.state

    return poll_until(check, what=subject, progress=progress, timeout=timeout)


def wait_gone(
    api: TpuBackend,
    name: str,
    *,
    progress: Progress = noop,
    timeout: float = 1800.0,
    say: Callable[[str], None] = lambda line: None,
) -> None:
    """Poll until nothing of the node bills: it no longer exists, or only parts of it that
    bill nothing are left (`Node.free_parts`), which are deleted then (`remove_free_parts`,
    telling `say`)."""

    def check() -> tuple[Node | bool | None, str]:
        try:
            node = api.get_node(name)
        except NotFoundError:
            return True, "GONE"
        return (node if node.free_parts else None), node.state

    left = poll_until(
        check, what=f"{name.rsplit('/', 1)[-1]} to be deleted", progress=progress, timeout=timeout
    )
    if isinstance(left, Node):
        remove_free_parts(api, left, say)


def remove_free_parts(api: TpuBackend, node: Node, say: Callable[[str], None]) -> bool:
    """Delete what is left of a node whose billing parts are gone (`Node.free_parts`),
    saying what went. A failure is said, not raised: nothing of it bills, and `tpuctl gc`
    or `tpuctl delete NAME` collects it later. True when nothing is left."""
    try:
        api.delete_node(node.full_name)
    except NotFoundError:
        return True
    except TpuctlError as e:
        say(
            f"{node.name}: its VMs are gone, but {node.free_parts} (which bill nothing) "
            f"could not be deleted: {e}; `tpuctl gc --yes` collects them, or "
            f"`tpuctl delete {node.name} --zone {node.zone} --yes`"
        )
        return False
    say(f"{node.name}: its VMs are gone; deleted {node.free_parts}, which bill nothing")
    return True


def set_labels(api: TpuBackend, name: str, changes: dict[str, str | None]) -> Node:
    """Set (or, with None, remove) labels; the rest of the node's labels are kept.

    The API replaces the whole label map, so read-modify-write; a concurrent change
    between the read and the write is rare for these labels and harmless to redo.
    """
    node = api.get_node(name)
    labels = dict(node.labels)
    for key, value in changes.items():
        if value is None:
            labels.pop(key, None)
        else:
            labels[key] = value
    validate_labels(labels)
    if labels != node.labels:
        api.set_labels(name, labels)
        node.labels = labels
    return node


def require_single_host(node: Node, verb: str) -> None:
    if len(node.workers) > 1:
        raise UsageError(
            f"cannot {verb} {node.name}: {node.accelerator_type} is a multi-host slice "
            f"({len(node.workers)} workers) and the TPU API only stops and starts single-host "
            "nodes",
            hint=f"delete it instead (`tpuctl delete {node.name} --zone {node.zone}`) and "
            "recreate it later",
        )


def delete_nodes(
    api: TpuBackend,
    nodes: list[Node],
    *,
    wait: bool = True,
    progress: Callable[[str, str, float], None] | None = None,
    max_parallel: int = 16,
    asked: Callable[[Node], None] = lambda node: None,
    say: Callable[[str], None] = lambda line: None,
) -> list[DeleteResult]:
    """Delete nodes concurrently; one result per node, in the order given. `asked` is
    told of each node once the cloud has its delete (from then on it goes on there,
    whatever becomes of this process).

    A node already gone or already being deleted counts as deleted; waited for, one that
    someone else is deleting has its free parts deleted here once its VMs are gone
    (`wait_gone`, telling `say`).
    """

    def one(node: Node) -> DeleteResult:
        def report(state: str, elapsed: float) -> None:
            if progress:
                progress(node.name, state, elapsed)

        try:
            if node.state != "DELETING":
                try:
                    api.delete_node(node.full_name)
                except NotFoundError:
                    return DeleteResult(node.name, True, "already gone", node)
            asked(node)
            if wait:
                wait_gone(api, node.full_name, progress=report, say=say)
                return DeleteResult(node.name, True, "deleted", node)
            return DeleteResult(node.name, True, "deletion started", node)
        except TpuctlError as e:
            return DeleteResult(node.name, False, str(e), node, e)

    return each(one, nodes, max_parallel)  # a Ctrl-C is never held until the deletes end
