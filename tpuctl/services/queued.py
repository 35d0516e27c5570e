"""Queued resources: ask for a node through the queue, wait for it, never leak the request.

A request abandoned by its client (interrupted, timed out) would still be filled later and
leave a node billing with nobody watching; so unless told to keep it, tpuctl deletes the
request, with force, which takes any node it already produced with it.

Multislice (`slices > 1`): one request for N nodes of the same accelerator, each a slice
with its own workers, named `<prefix>-0` ... `<prefix>-N-1` (docs/multislice.md). The
request is ACTIVE, and tpuctl's wait over, once every slice is READY; deleting it (with
force) deletes every slice.
"""

from __future__ import annotations

import contextlib
import copy
from typing import TYPE_CHECKING

from tpuctl import interrupts
from tpuctl.cloud import registry
from tpuctl.errors import (
    AlreadyExistsError,
    CloudError,
    Interrupted,
    NoCapacityError,
    NotFoundError,
    QueuedEnded,
    TpuctlError,
    WaitTimedOut,
)
from tpuctl.models import (
    QUEUED_ENDED,
    QUEUED_MADE_NO_NODE,
    CreateSpec,
    DeleteResult,
    Node,
    QueuedResource,
)
from tpuctl.queueing import (  # noqa: F401  (the queue's vocabulary, re-exported)
    DEFAULT_TIMEOUT,
    MAX_RUN_DURATION,
    QueueOptions,
    queue_spec,
    rfc3339,
)
from tpuctl.services import nodes
from tpuctl.waiting import Progress, noop, poll_until

if TYPE_CHECKING:
    from collections.abc import Callable

    from tpuctl.cloud.backend import TpuBackend
    from tpuctl.config import Target


def qr_name(target: Target, name: str) -> str:
    return f"{target.parent}/queuedResources/{name}"


def check_free(api: TpuBackend, target: Target, name: str) -> None:
    """Refuse a name a queued resource already has (the node name is checked elsewhere)."""
    try:
        existing = api.get_queued_resource(qr_name(target, name))
    except NotFoundError:
        return
    raise AlreadyExistsError(
        f"{registry.request_called(existing)} {name} already exists in zone {target.zone} "
        f"({existing.state})",
        hint=f"use another name, or delete it: `tpuctl delete {name} --zone {target.zone} --yes`",
    )


def create_queued(
    api: TpuBackend, target: Target, name: str, spec: CreateSpec, options: QueueOptions
) -> None:
    """Ask for the node through the queue (the request's id is the node's name). A
    signal during the create call interrupts once it has returned (`interrupts.deferred`):
    then the request is known to exist, and whoever catches the interruption deletes it."""
    check_free(api, target, name)
    _ask(api, target, name, spec, options)


def _ask(
    api: TpuBackend, target: Target, name: str, spec: CreateSpec, options: QueueOptions
) -> None:
    queue = queue_spec(spec, options)
    with interrupts.deferred():
        api.create_queued_resource(target.parent, name, spec, queue)


def wait_active(
    api: TpuBackend,
    target: Target,
    name: str,
    *,
    progress: Progress = noop,
    timeout: float = DEFAULT_TIMEOUT,
    seen: Callable[[QueuedResource], None] = lambda qr: None,
) -> tuple[QueuedResource, list[Node]]:
    """Poll the request until every node it asks for (one, or each slice) is READY.
    Raises `QueuedEnded` if it FAILS or is SUSPENDED, `WaitTimedOut` after `timeout`
    seconds. `seen` is told the request as each poll reads it."""
    full = qr_name(target, name)

    def check() -> tuple[tuple[QueuedResource, list[Node]] | None, str]:
        qr = api.get_queued_resource(full)
        seen(qr)
        if qr.state in QUEUED_ENDED:
            raise QueuedEnded(qr)
        if qr.state != "ACTIVE":
            return None, f"{qr.state}: {qr.progress}" if qr.progress else qr.state
        ready: list[Node] = []
        for node_id in qr.node_ids or [name]:
            try:
                node = api.get_node(f"{target.parent}/nodes/{node_id}")
            except NotFoundError:
                return None, "ACTIVE (node pending)"
            if node.state != "READY":
                return None, f"ACTIVE (node {node.state})"
            ready.append(node)
        return (qr, ready), "ACTIVE"

    return poll_until(
        check,
        what=f"{api.kind.multislice} {name}",
        progress=progress,
        timeout=timeout,
        timed_out=lambda state, elapsed: WaitTimedOut(f"{api.kind.multislice} {name} is {state}"),
    )


def delete_request(
    api: TpuBackend, full_name: str, *, progress: Progress = noop, timeout: float = 1800.0
) -> None:
    """Delete a queued resource with force (its nodes too) and wait until all are gone."""
    try:
        qr = api.get_queued_resource(full_name)
    except NotFoundError:
        return
    api.delete_queued_resource(full_name, force=True)

    def check() -> tuple[bool | None, str]:
        try:
            return None, api.get_queued_resource(full_name).state
        except NotFoundError:
            return True, "GONE"

    poll_until(check, what=f"{qr.name} to be deleted", progress=progress, timeout=timeout)
    # The request is gone; a node it made must be too (the cloud deletes them together).
    parent = full_name.split("/queuedResources/")[0]
    for node_id in qr.node_ids:
        node_name = f"{parent}/nodes/{node_id}"
        try:
            node = api.get_node(node_name)
        except NotFoundError:
            continue
        if node.queued_resource == full_name and node.state != "DELETING":
            api.delete_node(node_name)
        elif node.state == "DELETING" or node.free_parts:
            # going, or gone but for parts that bill nothing (a Compute Engine slice's
            # template and policy, once its VMs went): those too, once it is gone
            nodes.wait_gone(api, node_name, progress=progress, timeout=timeout)


def delete_slices(
    api: TpuBackend, full_name: str, slices: list[str], say: Callable[[str], None]
) -> None:
    """Delete a multislice request and every slice of it (`slices`: their full names),
    waiting until nothing of them bills. A request can read as gone while parts of its
    slices are left (on Compute Engine: a group whose VMs an agent's delete took, or a
    slice's template and policy): those are deleted here, one by one, saying so."""
    delete_request(api, full_name)
    left = []
    for name in slices:
        with contextlib.suppress(NotFoundError):
            left.append(api.get_node(name))
    for result in nodes.delete_nodes(api, left, say=say):
        if not result.ok and result.error is not None:
            raise result.error


def provision(
    api: TpuBackend,
    target: Target,
    name: str,
    options: QueueOptions,
    *,
    node_spec: CreateSpec | None = None,
    progress: Progress = noop,
) -> Node:
    """Ask for the node through the queue (when given its `node_spec`; else the request
    was made before) and wait for it. On failure, interruption or timeout, from the
    create call on, clean up: the request is deleted with its node unless
    `options.keep_request`. An interruption before the create call leaves alone whatever
    has the name (it is not this call's)."""
    return provision_slices(api, target, name, options, node_spec=node_spec, progress=progress)[0]


def provision_slices(
    api: TpuBackend,
    target: Target,
    name: str,
    options: QueueOptions,
    *,
    node_spec: CreateSpec | None = None,
    progress: Progress = noop,
) -> list[Node]:
    """`provision`, for every node of the request: its slices, in order."""
    made = _provision(api, target, name, options, node_spec, True, progress)
    assert made is not None
    return made


def enqueue(
    api: TpuBackend, target: Target, name: str, node_spec: CreateSpec, options: QueueOptions
) -> None:
    """Ask for the node through the queue and return (`create --queued --no-wait`); an
    interruption during the create call deletes the request, as `provision` does."""
    _provision(api, target, name, options, node_spec, False, noop)


def _provision(
    api: TpuBackend,
    target: Target,
    name: str,
    options: QueueOptions,
    node_spec: CreateSpec | None,
    wait: bool,
    progress: Progress,
) -> list[Node] | None:
    full = qr_name(target, name)
    where = f"--zone {target.zone}"
    asked = node_spec is None
    last: dict[str, QueuedResource | None] = {}  # the request as last read, and before
    try:
        if node_spec is not None:
            check_free(api, target, name)
            asked = True  # from here on, a request of that name is ours
            _ask(api, target, name, node_spec, options)
        if not wait:
            return None
        return wait_active(
            api,
            target,
            name,
            progress=progress,
            timeout=options.timeout,
            seen=lambda qr: last.update(before=last.get("qr"), qr=qr),
        )[1]
    except QueuedEnded as e:
        delete_request(api, full)
        reason = e.qr.error or (
            "its node was preempted or deleted" if e.qr.state != "FAILED" else "no reason given"
        )
        before = last.get("before")  # as the poll before the end read it
        waited = before is not None and before.state in WAITING_FOR_CAPACITY
        if e.qr.failure is None and e.qr.state == "FAILED" and waited:
            # it failed while it waited for capacity (its validity ran out): no capacity in
            # this zone in time, which the next zone (or API) may have
            raise NoCapacityError(
                f"{called_of(api, options)} {name} ended FAILED while waiting for capacity in "
                f"{target.zone}: {reason}; tpuctl deleted the request",
                hint="try again later, in another zone (--zone A,B), or with a longer "
                "--valid-until",
            ) from None
        if isinstance(e.qr.failure, TpuctlError):  # the adapter's own: no capacity, quota
            failure = copy.copy(e.qr.failure)
            failure.message = (
                f"{name} ended {e.qr.state}: {reason}; tpuctl deleted what it had made"
            )
            raise failure from None
        raise CloudError(
            f"{api.kind.multislice} {name} ended {e.qr.state}: {reason}; tpuctl deleted the "
            "request",
            hint="try again later, in another zone, or with a longer --valid-until",
        ) from None
    except (KeyboardInterrupt, WaitTimedOut) as e:
        if not asked:
            raise
        interrupted = isinstance(e, KeyboardInterrupt)
        why = "stopped waiting" if interrupted else f"gave up after {int(options.timeout)}s"
        seen_last = last.get("qr")
        if seen_last is not None and seen_last.progress:  # which slices had no capacity yet
            why += f" ({seen_last.progress})"
        called = called_of(api, options)
        if options.keep_request:
            error: TpuctlError = CloudError(
                f"{why}; {called} {name} stays queued (--keep-request) and its node "
                "will bill once it is provisioned",
                hint=f"watch it with `tpuctl list {where}`; delete it with "
                f"`tpuctl delete {name} {where} --yes`",
            )
        else:
            try:
                delete_request(api, full)
            except KeyboardInterrupt:  # a second signal while deleting: say what may be left
                raise Interrupted(
                    f"left at once; {called} {name} may still exist and bill once "
                    "it is provisioned",
                    hint=f"delete it with `tpuctl delete {name} {where} --yes`",
                ) from None
            error = CloudError(
                f"{why}; deleted {called} {name} (and any node it had made), so "
                "nothing is left billing",
                hint="pass --keep-request to leave a request queued when you stop waiting",
            )
        if interrupted:
            raise Interrupted(str(error), hint=error.hint) from None
        raise error from None


# the states of a request still waiting for capacity (a FAILED one had made no node)
WAITING_FOR_CAPACITY = QUEUED_MADE_NO_NODE - {"FAILED"}


def called_of(api: TpuBackend, options: QueueOptions) -> str:
    """What the request is called on its API: a queued resource, or a multislice."""
    return api.kind.multislice if options.slices > 1 else "queued resource"


def plan(options: QueueOptions, started: float, then: str = "") -> str:
    """What ends a wait for capacity, and what comes next, for the progress line:
    `; the request expires at 14:30 UTC (--valid-until), then us-east5-a` or `; tpuctl
    stops waiting at 15:00 UTC (--timeout)`. `then`: the next zone (or API) to try."""
    from tpuctl.timestamps import utc_clock

    stops = started + options.timeout
    expires: float | None = None
    if options.valid_until:
        expires = started + options.valid_until
    elif options.valid_until_time:
        from datetime import datetime

        stamp = options.valid_until_time.replace("Z", "+00:00")
        with contextlib.suppress(ValueError):
            expires = datetime.fromisoformat(stamp).timestamp()
    after = f", then {then}" if then else ", then tpuctl gives up"
    if expires is not None and expires < stops:
        flag = "--valid-until" if options.valid_until else "--valid-until-time"
        return f"; the request expires at {utc_clock(expires)} ({flag}){after}"
    return f"; tpuctl stops waiting at {utc_clock(stops)} (--timeout), deleting the request"


def planned(progress: Progress, text: str) -> Progress:
    """`progress` with `text` (a `plan`) after each state of a request still waiting
    for capacity."""

    def update(state: str, elapsed: float) -> None:
        waiting = state.split(":")[0].strip() in WAITING_FOR_CAPACITY
        progress(state + text if waiting else state, elapsed)

    return update


def delete_queued(
    api: TpuBackend,
    qr: QueuedResource,
    *,
    wait: bool = True,
    progress: Progress = noop,
) -> DeleteResult:
    """`tpuctl delete` of a queued resource: the request and its nodes, together."""
    try:
        if wait:
            delete_request(api, qr.full_name, progress=progress)
            what = "deleted"
        else:
            api.delete_queued_resource(qr.full_name, force=True)
            what = "deletion started"
        # A request still waiting names the node it would make, but has made none.
        made = qr.node_ids and qr.state not in QUEUED_MADE_NO_NODE
        plural = "s" if len(qr.node_ids) > 1 else ""
        nodes = f" with its node{plural} {', '.join(qr.node_ids)}" if made else ""
        return DeleteResult(qr.name, True, f"{registry.request_called(qr)} {what}{nodes}")
    except TpuctlError as e:
        return DeleteResult(qr.name, False, str(e), error=e)
