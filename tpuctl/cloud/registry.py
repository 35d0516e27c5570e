"""The TPU APIs tpuctl knows and what `--api` accepts. Nothing depends on their order
here: callers ask an entry's declared capabilities (`BackendKind.lists_requests`,
`reports_quota`, `preference`, `judges_unknown`) through `requests_api`, `quota_api`,
`preferred` and `offering`, and find a node's API by its key (`holder`).

Each entry is a `BackendKind` declared by its package (`cloud/tpu/`, `cloud/compute/`)
without loading any client library, so `--help` and the checks of what the user typed
stay fast. A new API is one package and one line here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

from tpuctl.agent import bundle
from tpuctl.cloud import compute, tpu
from tpuctl.errors import CloudError, ConfigError, UsageError

if TYPE_CHECKING:
    from tpuctl.catalog.shapes import SliceShape
    from tpuctl.cloud.backend import BackendKind, TpuBackend
    from tpuctl.models import Node, QueuedResource

KINDS: list[BackendKind] = [tpu.KIND, compute.KIND]
AUTO = "auto"  # --api auto: any API that offers the shape, preferred first

B = TypeVar("B", bound="TpuBackend")


def agent_modules() -> dict[str, str]:
    """The agent targets the bundle carries for the registered APIs that declare their own
    (`BackendKind.agent_module`), by key."""
    return {k.key: k.agent_module for k in KINDS if k.agent_module}


bundle.carried = agent_modules  # the bundle reads the registry as it is when built


def known() -> tuple[str, ...]:
    return tuple(k.key for k in KINDS)


def kind(key: str) -> BackendKind:
    """The entry of `key`; a UsageError naming the choices for one tpuctl does not know."""
    for k in KINDS:
        if k.key == key:
            return k
    raise UsageError(f"invalid --api {key!r}: use {choices()}")


def choices(auto: bool = False) -> str:
    """`tpu or compute` (with `auto`: `tpu, compute or auto`) for messages."""
    names = [*known(), *([AUTO] if auto else [])]
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]


def is_auto(value: str | None) -> bool:
    """Whether an --api value asks for any API that offers the shape, in order."""
    return value == AUTO


def _one(flag: str, what: str) -> BackendKind:
    found = [k for k in KINDS if getattr(k, flag)]
    if len(found) != 1:
        named = ", ".join(k.key for k in found) or "none"
        raise ConfigError(f"the registry needs one API that {what} ({flag}), and has {named}")
    return found[0]


def _of(backends: Sequence[B], kind: BackendKind) -> B:
    found = next((b for b in backends if b.kind.key == kind.key), None)
    if found is None:
        raise ConfigError(f"{kind.called} is not among the APIs asked")
    return found


def requests_api(backends: Sequence[B]) -> B:
    """The backend whose queued requests are listed on their own (`lists_requests`)."""
    return _of(backends, _one("lists_requests", "lists queued requests on their own"))


def quota_api(backends: Sequence[B]) -> B:
    """The backend whose quota `tpuctl quota` reports row by row (`reports_quota`)."""
    return _of(backends, _one("reports_quota", "reports its quota row by row"))


def quota_kind() -> BackendKind:
    """The entry whose quota is the catalogue's quota table (`reports_quota`)."""
    return _one("reports_quota", "reports its quota row by row")


def ranked(kinds: Sequence[BackendKind]) -> list[BackendKind]:
    """`kinds` by their declared `preference`, highest first (ties by key): never by the
    registry's order."""
    return sorted(kinds, key=lambda k: (-k.preference, k.key))


def preferred(shape: SliceShape | None = None) -> BackendKind:
    """The API `shape` goes to when nothing says otherwise: of those that offer it (no
    shape: of all), the one that claims it by name, else the highest `preference`. A
    UsageError naming the shape when no API offers it."""
    kinds = offering(shape) if shape is not None else ranked(KINDS)
    if not kinds:
        raise UsageError(f"invalid --accelerator {shape.name if shape else ''!r}: no API offers it")
    return kinds[0]


def offering(shape: SliceShape) -> list[BackendKind]:
    """The APIs that offer `shape`, those that claim it first, then by `preference`. A
    shape tpuctl does not know goes to the APIs that name it as theirs, else to the judges
    of unknown names (`judges_unknown`)."""
    offered = [k for k in KINDS if k.offers(shape)]
    claiming = [k for k in offered if k.claims(shape)]
    return ranked(claiming) + ranked([k for k in offered if k not in claiming])


def holder(backends: Sequence[B], node: Node | QueuedResource) -> B:
    """The backend of `backends` that holds `node` (or a queued request), by its `api`
    key; a CloudError naming it when none of them does (never a guess)."""
    found = next((b for b in backends if b.kind.key == node.api), None)
    if found is None:
        known = ", ".join(b.kind.key for b in backends)
        raise CloudError(f"{node.name} is held by API {node.api!r}, not one of {known}")
    return found


def request_called(item: Node | QueuedResource, multislice: bool = False) -> str:
    """What the API holding `item` calls N slices made as one, in a sentence: "queued
    resource" on the Cloud TPU API ("multislice queued resource" with `multislice`),
    "multislice" on Compute Engine, which has no queued resource (BackendKind.multislice)."""
    held = next((k for k in KINDS if k.key == item.api), None)
    called = held.multislice if held else "queued resource"
    return f"multislice {called}" if multislice and "multislice" not in called else called


def title_of(node: Node) -> str:
    """The name of the API that holds `node`, as a table shows it."""
    return next((k.title for k in KINDS if k.key == node.api), node.api)
