"""The TPU APIs tpuctl knows, in look-up order: where a name is looked for first, which
API a shape both offer goes to by default, and what `--api` accepts.

Each entry is a `BackendKind` declared by its package (`cloud/tpu/`, `cloud/compute/`)
without loading any client library, so `--help` and the checks of what the user typed
stay fast. A new API is one package and one line here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

from tpuctl.cloud import compute, tpu
from tpuctl.errors import UsageError

if TYPE_CHECKING:
    from tpuctl.catalog.shapes import SliceShape
    from tpuctl.cloud.backend import BackendKind, TpuBackend
    from tpuctl.models import Node, QueuedResource

KINDS: list[BackendKind] = [tpu.KIND, compute.KIND]
AUTO = "auto"  # --api auto: any API that offers the shape, in order

B = TypeVar("B", bound="TpuBackend")


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


def default() -> BackendKind:
    """The API a shape that several offer goes to when nothing says otherwise: the first,
    which existing projects have quota for."""
    return KINDS[0]


def offering(shape: SliceShape) -> list[BackendKind]:
    """The APIs that offer `shape`, in order (a shape tpuctl does not know: the first,
    which is the judge of what it offers)."""
    if not shape.known:
        return [KINDS[0]]
    return [k for k in KINDS if k.offers(shape)]


def holder(backends: Sequence[B], node: Node | QueuedResource) -> B:
    """The backend of `backends` that holds `node` (or a queued request; the first when
    none is its)."""
    return next((b for b in backends if b.kind.key == node.api), backends[0])


def request_called(item: Node | QueuedResource, multislice: bool = False) -> str:
    """What the API holding `item` calls N slices made as one, in a sentence: "queued
    resource" on the Cloud TPU API ("multislice queued resource" with `multislice`),
    "multislice" on Compute Engine, which has no queued resource (BackendKind.multislice)."""
    called = next((k.multislice for k in KINDS if k.key == item.api), KINDS[0].multislice)
    return f"multislice {called}" if multislice and "multislice" not in called else called


def title_of(node: Node) -> str:
    """The name of the API that holds `node`, as a table shows it."""
    return next((k.title for k in KINDS if k.key == node.api), node.api)
