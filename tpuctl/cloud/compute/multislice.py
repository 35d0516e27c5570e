"""Multislice on Compute Engine: N slices of one accelerator, made as one unit in one zone,
behind the backend protocol's queued-resource calls (`cloud/backend.py`), so that services
make, wait for, list and delete them as they do the Cloud TPU API's multislice queued
resource (docs/multislice.md).

Compute Engine has no queued resource: the unit is tpuctl's. Slice k of the request NAME
is an ordinary TPU VM or slice named `NAME-k` (a single-host VM, or a workload policy, an
instance template and a managed instance group: `slices.py`), each slice with its own
policy, as GKE gives each slice of a multislice its own node pool. Every VM carries the
labels `tpuctl-multislice=NAME` and `tpuctl-slices=N` (from its template), by which the
request is found again; its state is the slices':

- ACTIVE once every slice is READY; PROVISIONING before;
- FAILED when a slice cannot be had (a VM the group could not make for capacity or
  quota): all or nothing, so services delete every slice, saying why;
- SUSPENDED when a slice is lost (preempted, terminated, deleted): the others cannot go
  on alone;
- DELETING while one goes.

A slice that cannot be made at its create call (a refusal, no capacity for a single-host
VM) deletes the slices made before it, and the error names the slice.

Flex-start (`--flex-start --max-run-duration D`): every slice is asked for at once (each
group in bulk mode, each single-host VM with its own wait), so all wait for capacity
together. Compute Engine grants each group whole, but no call of it grants several
groups together: the request reads WAITING_FOR_RESOURCES while no slice has capacity,
PROVISIONING once some have, and its `progress` names which slices have it and which
wait. tpuctl's wait (services/queued.py) ends when all have it, or deletes them all.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import TYPE_CHECKING

from tpuctl.cloud.compute import KIND, flex, slice_state
from tpuctl.cloud.compute import slices as compute_slice
from tpuctl.cloud.compute.api import ComputeTpuApi
from tpuctl.errors import AlreadyExistsError, NotFoundError, TpuctlError, UsageError
from tpuctl.models import (
    CreateSpec,
    Node,
    QueuedResource,
    QueueSpec,
    slice_id,
    slice_ids,
    slice_index,
)
from tpuctl.startup import STARTUP_SCRIPT

if TYPE_CHECKING:
    from tpuctl.queueing import QueueOptions

MULTISLICE = "tpuctl-multislice"  # label: the request a slice's VMs belong to
SLICES = "tpuctl-slices"  # label: how many slices the request has
LOST = ("PREEMPTED", "TERMINATED", "STOPPED", "STOPPING", "SUSPENDED")
WAITING = "WAITING_FOR_RESOURCES"  # a flex-start slice with no capacity yet


def _split(name: str) -> tuple[str, str, str]:
    """`projects/P/locations/Z/queuedResources/NAME` -> (P, Z, NAME)."""
    parts = name.split("/")
    return parts[1], parts[3], parts[-1]


def request_of(node: Node) -> str:
    """The full name of the multislice request `node` is a slice of ('' for none)."""
    request = node.labels.get(MULTISLICE, "")
    if not request or slice_index(node.name, request) is None:
        return ""
    return f"projects/{node.project}/locations/{node.zone}/queuedResources/{request}"


def _count(node: Node) -> int:
    """How many slices a slice's label says its request has (0: none readable)."""
    value = node.labels.get(SLICES, "")
    return int(value) if value.isdigit() else 0


class ComputeMultisliceApi(ComputeTpuApi):
    """ComputeTpuApi, with N slices made, read and deleted as one request."""

    # -- slices read as a request's --------------------------------------------------
    def get_node(self, name: str) -> Node:
        return _tagged(super().get_node(name))

    def list_nodes(self, parent: str) -> list[Node]:
        return [_tagged(n) for n in super().list_nodes(parent)]

    def _slices_of(self, parent: str, request: str) -> tuple[dict[int, Node], int]:
        """The slices of `request` found in the zone, by index, and how many it has."""
        found = _by_index(self.list_nodes(parent), request)
        labelled = [n for n in found.values() if n.labels.get(MULTISLICE) == request]
        if not labelled:
            return {}, 0
        count = max(_count(n) for n in labelled)
        # a slice whose VMs are all gone shows no labels: its name says whose it is
        members = {
            k: n
            for k, n in found.items()
            if k < count and (n.labels.get(MULTISLICE) == request or not n.labels)
        }
        return members, count

    def get_queued_resource(self, name: str) -> QueuedResource:
        project, zone, request = _split(name)
        parent = f"projects/{project}/locations/{zone}"
        members, count = self._slices_of(parent, request)
        if not members:
            raise NotFoundError(f"no multislice {request} in zone {zone} on Compute Engine")
        failure = self._failure(members, count)
        if failure is not None:
            state, error = "FAILED", str(failure)
        else:
            state, error = _summary(members, count, request)
        made = _request(project, zone, request, count, members, state, error)
        made.failure = failure
        return made

    def list_queued_resources(self, parent: str) -> list[QueuedResource]:
        return self.requests_of(self.list_nodes(parent))

    def requests_of(self, nodes: list[Node]) -> list[QueuedResource]:
        by_request: dict[tuple[str, str], list[Node]] = {}
        for node in map(_tagged, nodes):
            if request_of(node):
                by_request.setdefault((node.zone, node.labels[MULTISLICE]), []).append(node)
        out = []
        for (zone, request), group in sorted(by_request.items()):
            count = max(_count(n) for n in group)
            members = _by_index(group, request)
            state, error = _summary(members, count, request)
            out.append(_request(group[0].project, zone, request, count, members, state, error))
        return out

    def _failure(self, members: dict[int, Node], count: int) -> TpuctlError | None:
        """Why a slice cannot be had: the first VM its group could not make (no capacity,
        no quota), asked of each slice's group that is not READY yet, or a flex-start
        group's wait for capacity that has ended (--valid-until)."""
        for k, node in sorted(members.items()):
            if node.state in ("READY", "DELETING") or not (node.raw or {}).get("group"):
                continue
            mig = compute_slice.paths(node.project, node.zone, node.name)[0]
            subject = f"slice {k} of {count} ({node.name})"
            error = slice_state.capacity_error(self._managed(mig, node.project), subject)
            if error is None and node.state == WAITING:
                error = self.wait_ended(node.project, node.zone, node.raw["group"], subject)
            if error is not None:
                return error
        return None

    # -- making and deleting it ------------------------------------------------------
    def create_queued_resource(
        self, parent: str, qr_id: str, spec: CreateSpec, queue: QueueSpec
    ) -> str | None:
        if queue.slices <= 1:
            return super().create_queued_resource(parent, qr_id, spec, queue)
        names = [f"{parent}/nodes/{n}" for n in slice_ids(qr_id, queue.slices)]
        for name in names:  # what is undone below must be this create's own
            with contextlib.suppress(NotFoundError):
                self.get_node(name)
                raise AlreadyExistsError(
                    f"a TPU VM or slice named {name.rsplit('/', 1)[-1]} exists in zone "
                    f"{_split(name)[1]}: the slices of {qr_id} would take its name",
                    hint="use another name",
                )
        made: list[str] = []
        try:
            for k, name in enumerate(names):
                short = name.rsplit("/", 1)[-1]
                one = dataclasses.replace(
                    spec,
                    name=short,
                    labels={**spec.labels, MULTISLICE: qr_id, SLICES: str(queue.slices)},
                    metadata=_own_script(spec, short),
                )
                made.append(name)
                try:
                    self._make(parent, one)
                except TpuctlError as e:
                    e.message = f"slice {k} of {queue.slices} ({one.name}): {e.message}"
                    raise
        except BaseException as e:
            gone = self._undo(made)
            if isinstance(e, TpuctlError) and gone:
                e.message += f"; deleted what was made of {qr_id} ({', '.join(gone)})"
            raise
        return None

    def _make(self, parent: str, spec: CreateSpec) -> None:
        """Make one slice: a group's insert is waited for by `create_node`; a single-host
        VM's insert here, so that no capacity for it is known before the next slice. A
        flex-start VM's insert is not waited for: it waits for capacity (PENDING) with the
        other slices, which are asked for at once."""
        operation = self.create_node(parent, spec)
        if operation is None or spec.shape.multi_host or spec.flex_start:
            return
        from tpuctl.waiting import poll_until

        def check() -> tuple[bool | None, str]:
            status = self.operation_status(operation, f"the create of {spec.name}")
            if status.error is not None:
                raise status.error
            return (True, "DONE") if status.done else (None, "CREATING")

        poll_until(check, what=f"the create of {spec.name}", timeout=1800.0)

    def _undo(self, made: list[str]) -> list[str]:
        """Delete the slices of `made` that exist; their names."""
        gone = []
        for name in made:
            with contextlib.suppress(NotFoundError):
                self.delete_node(name)
                gone.append(name.rsplit("/", 1)[-1])
        return gone

    def delete_queued_resource(self, name: str, force: bool = True) -> str | None:
        project, zone, request = _split(name)
        members, _ = self._slices_of(f"projects/{project}/locations/{zone}", request)
        for node in members.values():
            if node.state != "DELETING":
                with contextlib.suppress(NotFoundError):  # gone meanwhile
                    self.delete_node(node.full_name)
        return None

    def check_request(self, spec: CreateSpec, queue: QueueOptions, queued: bool) -> bool:
        if queue.slices <= 1:
            return super().check_request(spec, queue, queued)
        if queue.flex_start:
            flex.check(spec, queue)  # each slice waits as one flex-start slice would
        elif queue.valid_until or queue.valid_until_time:
            flag = "--valid-until" if queue.valid_until else "--valid-until-time"
            raise UsageError(
                f"{flag} goes with --slices on Compute Engine only with --flex-start: "
                "without it, the slices are made at once, with no queue to wait in",
                hint="drop it, or add --flex-start --max-run-duration D to wait for capacity",
            )
        # a multislice is a request tpuctl waits for, as a queued resource is (False)
        return super().check_request(spec, queue, True)


def _own_script(spec: CreateSpec, name: str) -> dict[str, str]:
    """The slice's metadata, its startup script written for the slice (`spec.startup`):
    its programs (the boot guard, the idle watchdog: `--target compute:NAME`,
    agent/target.py) told the slice they run on, not the request, which is no group nor
    VM: a guard whose client died deletes its own slice's group (or VM), whichever slice
    it is and whenever that slice got capacity."""
    if spec.startup is None:
        return dict(spec.metadata)
    return {**spec.metadata, STARTUP_SCRIPT: spec.startup.script(KIND.agent_target(name))}


def _by_index(nodes: list[Node], request: str) -> dict[int, Node]:
    """The nodes named as slices of `request` (`models.slice_id`), by their index."""
    return {k: n for n in nodes if (k := slice_index(n.name, request)) is not None}


def _tagged(node: Node) -> Node:
    request = request_of(node)
    if request:
        node.queued_resource = request
    return node


def _summary(members: dict[int, Node], count: int, request: str) -> tuple[str, str]:
    if any(n.state == "DELETING" for n in members.values()):
        return "DELETING", ""
    for k in range(count):
        node = members.get(k)
        if node is None or node.state in LOST or node.free_parts:
            state = "gone" if node is None else node.state
            why = f": {node.health_description}" if node and node.health_description else ""
            return "SUSPENDED", f"slice {k} of {count} ({slice_id(request, k)}) is {state}{why}"
    if all(n.state == "READY" for n in members.values()):
        return "ACTIVE", ""
    if members and all(n.state == WAITING for n in members.values()):
        return WAITING, ""
    return "PROVISIONING", ""


def _progress(members: dict[int, Node], count: int, request: str) -> str:
    """Which slices of a flex-start request wait for capacity and which have it:
    `slice 1 of 2 (ms-1) waiting for capacity; slice 0 (ms-0) granted` ('' when none
    waits)."""
    waiting = [k for k, n in sorted(members.items()) if n.state == WAITING]
    if not waiting:
        return ""
    granted = [k for k in sorted(members) if k not in waiting]
    said = f"{_slices(waiting, request, f' of {count}')} waiting for capacity"
    if granted:
        said += f"; {_slices(granted, request)} granted"
    return said


def _slices(ks: list[int], request: str, of: str = "") -> str:
    """`slices 0, 2 of 4 (ms-0, ms-2)`."""
    numbers, names = ", ".join(map(str, ks)), ", ".join(slice_id(request, k) for k in ks)
    return f"slice{'s' if len(ks) > 1 else ''} {numbers}{of} ({names})"


def _request(
    project: str,
    zone: str,
    request: str,
    count: int,
    members: dict[int, Node],
    state: str,
    error: str,
) -> QueuedResource:
    first = members[min(members)]
    return QueuedResource(
        name=request,
        project=project,
        zone=zone,
        state=state,
        node_ids=slice_ids(request, count),
        accelerator_type=first.accelerator_type,
        spot=first.spot,
        labels={k: v for k, v in first.labels.items() if k not in (MULTISLICE, SLICES)},
        create_time=first.create_time,
        error=error,
        api=KIND.key,
        flex_start=first.flex_start,
        progress=_progress(members, count, request),
    )
