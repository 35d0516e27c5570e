"""Finding a node by name on the first of several APIs that has it; a module of its own,
so that any service (ssh's plan too) can use it without importing the rest of nodes.py."""

from __future__ import annotations

from collections.abc import Sequence

from tpuctl.cloud.backend import TpuBackend
from tpuctl.errors import NotFoundError, TpuctlError
from tpuctl.models import Node


def find_node(backends: TpuBackend | Sequence[TpuBackend], name: str) -> tuple[TpuBackend, Node]:
    """The node called `name` (a full name) on the first API that has it, with that
    API's adapter; NotFoundError (the first API's) when none has. An API that cannot be
    asked (off in the project, no permission) counts as not having it."""
    if not isinstance(backends, Sequence):
        backends = (backends,)
    first: NotFoundError | None = None
    for i, api in enumerate(backends):
        try:
            return api, api.get_node(name)
        except NotFoundError as e:
            first = first or e
        except TpuctlError:
            if i == 0:
                raise
    assert first is not None
    raise first
