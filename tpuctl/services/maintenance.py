"""A node's host maintenance: what its API announced, and starting a pending one now
(`tpuctl maintain`). Which call starts it is the backend's (`perform_maintenance`):
Compute Engine's `instances.performMaintenance` on each VM, the Cloud TPU API's v2alpha1
`nodes.performMaintenance`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from tpuctl.errors import CloudError, UsageError
from tpuctl.host_maintenance import Maintenance
from tpuctl.models import Node
from tpuctl.services import locate, names
from tpuctl.waiting import poll_until

if TYPE_CHECKING:
    from tpuctl.cloud.backend import TpuBackend
    from tpuctl.config import Target


def find(
    backends: Sequence[TpuBackend],
    target: Target,
    name: str,
    say: Callable[[str], None] = lambda line: None,
) -> tuple[TpuBackend, Node]:
    """The node `name` and the API that holds it (in another zone if only there)."""
    names.validate_name(name)
    return locate.locate(backends, target, name, say)


def refusal(name: str, upcoming: Maintenance | None) -> UsageError | None:
    """Why the maintenance of `name` cannot be started now; None when it can."""
    if upcoming is None:
        return UsageError(
            f"no maintenance announced for {name}: there is nothing to start",
            hint=f"`tpuctl describe {name}` shows a maintenance once its API announces one",
        )
    if upcoming.ongoing:
        return UsageError(
            f"the maintenance of {name} has already started ({upcoming.window()})",
            hint="wait for its window to end",
        )
    if not upcoming.can_reschedule:
        return UsageError(
            f"the maintenance of {name} cannot be started early ({upcoming.summary()})",
            hint="it starts on its own at its window's start",
        )
    return None


def start_now(
    backends: Sequence[TpuBackend],
    target: Target,
    name: str,
    say: Callable[[str], None] = lambda line: None,
    timeout: float = 600.0,
) -> Node:
    """Start the pending maintenance of `name` now; the node as it is once the API's
    operation is done. A UsageError when nothing can be started (the API's refusal too,
    when the maintenance changed meanwhile)."""
    api, node = find(backends, target, name, say)
    refused = refusal(name, node.maintenance)
    if refused is not None:
        raise refused
    try:
        operation = api.perform_maintenance(node.full_name)
    except CloudError:
        refused = refusal(name, api.get_node(node.full_name).maintenance)
        if refused is not None:
            raise refused from None
        raise
    if operation:
        subject = f"the maintenance of {name}"

        def done() -> tuple[bool | None, str]:
            status = api.operation_status(operation, subject)
            if status.error is not None:
                raise status.error
            return (True, "DONE") if status.done else (None, "RUNNING")

        poll_until(done, what=subject, timeout=timeout)
    return api.get_node(node.full_name)
