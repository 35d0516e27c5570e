"""ComputeTpuApi: TPU VMs on Compute Engine behind the backend protocol (`cloud/backend.py`).

A single-host TPU VM is one VM instance (TPU7x, v6e and v5p machine types); a multi-host
slice is a workload policy, an instance template and a managed instance group
(`slices.py`), read and deleted as one node. REST through google-auth's authorised
session (`cloud/rest.py`): google-cloud-compute costs 1.7 s to import and its operations
poll Google's endpoint whatever the client's is. Services name a node as on the TPU API,
`projects/P/locations/ZONE/nodes/NAME`; here that is the instance NAME in ZONE.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from tpuctl.catalog.shapes import SliceShape
from tpuctl.cloud.compute import slice_state
from tpuctl.cloud.compute import slices as compute_slice
from tpuctl.cloud.compute import wire as compute_wire
from tpuctl.cloud.compute.reads import ComputeReads, parts
from tpuctl.cloud.compute.rules import ComputeRules
from tpuctl.errors import (
    AlreadyExistsError,
    CloudError,
    NotFoundError,
    PreconditionFailedError,
    TpuctlError,
    UsageError,
)
from tpuctl.models import CreateSpec, Node, OperationStatus

MAX_RUN_SECONDS = 120 * 86400  # scheduling.maxRunDuration's limit
SLICE_OP = "~slice~"  # an operation name's tail: the create of a slice, waited until its VMs run


class ComputeTpuApi(ComputeReads, ComputeRules):
    """TPU VMs and slices on Compute Engine, as tpuctl's services use a TPU API: the
    reads (`reads.py`), the rules (`rules.py`), and here what creates and changes them."""

    def create_node(self, parent: str, spec: CreateSpec) -> str | None:
        project, zone = parent.split("/")[1], parent.split("/")[3]
        if spec.ttl is not None and not 30 <= spec.ttl <= MAX_RUN_SECONDS:
            raise UsageError(
                f"--ttl of {spec.ttl} s is outside what Compute Engine enforces on a VM "
                "(its maxRunDuration: 30 s to 120 days)",
                hint="a TTL from 30s to 120d (e.g. --ttl 8h)",
            )
        if spec.shape.multi_host:
            made = compute_slice.create(self._call, self._wait, project, spec, zone)
            if not made:  # its group adopted: made by this create's lost first attempt
                return None
            op_name = f"{made['name']}{SLICE_OP}{spec.name}"
            return f"projects/{project}/locations/{zone}/operations/{op_name}"
        subject, instances = (
            f"instance '{spec.name}' in zone {zone}",
            f"projects/{project}/zones/{zone}/instances",
        )
        body = compute_wire.instance_body(spec, zone)
        try:
            op = self._call(
                "POST", instances, subject, project, json=body, params=compute_wire.once()
            )
        except AlreadyExistsError:  # made by this create's lost first attempt: adopted
            if compute_wire.made_by(
                self._call("GET", f"{instances}/{spec.name}", subject, project), spec
            ):
                return None
            raise
        return f"projects/{project}/locations/{zone}/operations/{op['name']}"

    def _action(self, name: str, verb: str) -> str | None:
        project, zone, node, path = self._instance(name)
        subject = f"instance '{node}' in zone {zone}"
        once = compute_wire.once()
        if verb == "delete":
            op = self._call("DELETE", path, subject, project, params=once)
            self._deleting.add((project, zone, node))
        else:
            try:
                op = self._call("POST", f"{path}/{verb}", subject, project, params=once)
            except NotFoundError as e:
                if self._slice(project, zone, node, e):
                    raise UsageError(
                        f"{node} is a multi-host slice on Compute Engine, which cannot be "
                        f"{verb}ped: its managed instance group would not keep the slice whole",
                        hint=f"delete it (`tpuctl delete {node}`) and create it again",
                    ) from None
                raise
        return f"projects/{project}/locations/{zone}/operations/{op['name']}"

    def delete_node(self, name: str) -> str | None:
        """A single-host instance: its delete's operation. A slice: its MIG (with its VMs),
        then its template, then its policy, each waited for (a template or policy still
        in use cannot be deleted); None, as it is gone when this returns."""
        project, zone, node, _path = self._instance(name)
        try:
            return self._action(name, "delete")
        except NotFoundError as e:
            missing = e
        mig, template, policy = compute_slice.paths(project, zone, node)
        gone = True
        for path, what in (
            (mig, "managed instance group"),
            (template, "instance template"),
            (policy, "workload policy"),
        ):
            if self._ours(path, what, node, zone, project) is None:
                continue
            gone = False
            with contextlib.suppress(NotFoundError):  # gone meanwhile
                subject = f"{what} {path.rsplit('/', 1)[-1]}"
                op = self._call("DELETE", path, subject, project, params=compute_wire.once())
                self._wait(op, f"the delete of {subject}")
        if gone:
            raise missing
        return None

    def _wait(self, op: dict[str, Any], subject: str, timeout: float = 1800.0) -> None:
        """Wait for a zone, region or global operation to be DONE (Compute's `wait`, which
        answers within about 2 minutes, DONE or not); raise its error."""
        import time

        path = str(op.get("selfLink", "")).split("/compute/", 1)[-1].split("/", 1)[-1]
        project = path.split("/")[1] if path.startswith("projects/") else ""
        deadline = time.monotonic() + timeout
        while op.get("status") != "DONE":
            if time.monotonic() > deadline:
                raise CloudError(f"{subject} did not finish in {timeout:.0f} s")
            op = self._call("POST", f"{path}/wait", subject, project)
        error = compute_wire.operation_error(op, subject)
        if error is not None:
            raise error

    def stop_node(self, name: str) -> str | None:
        return self._action(name, "stop")

    def start_node(self, name: str) -> str | None:
        return self._action(name, "start")

    def set_labels(self, name: str, labels: dict[str, str]) -> str:
        """Every VM of the node: the instance, or each VM of a slice (a slice's labels are
        its VMs': slices.node), each guarded by its label fingerprint; the last one's
        operation."""
        return self._on_each_vm(
            name,
            "setLabels",
            lambda vm: {"labels": labels, "labelFingerprint": vm.get("labelFingerprint", "")},
        )

    def perform_maintenance(self, name: str) -> str | None:
        """Start the pending maintenance of every VM of the node now (the instance, or each
        VM of a slice: `instances.performMaintenance`); the last one's operation."""
        return self._on_each_vm(name, "performMaintenance", lambda vm: None)

    def _on_each_vm(
        self, name: str, verb: str, body: Callable[[dict[str, Any]], dict[str, Any] | None]
    ) -> str:
        """`POST .../instances/VM/{verb}` on each VM of the node, in worker order, with
        `body(vm)` as its JSON (none when None); the last one's operation."""
        project, zone = parts(name)[:2]
        op: dict[str, Any] = {}
        for vm in self._vms(name):
            path = str(vm.get("selfLink", "")).split("/compute/", 1)[-1].split("/", 1)[-1]
            sent = body(vm)
            op = self._call(
                "POST",
                f"{path}/{verb}",
                f"instance '{vm.get('name')}' in zone {zone}",
                project,
                params=compute_wire.once(),
                **({} if sent is None else {"json": sent}),
            )
        return f"projects/{project}/locations/{zone}/operations/{op.get('name', '')}"

    def patch_metadata(
        self, name: str, change: Callable[[dict[str, str]], dict[str, str] | None]
    ) -> Node:
        """Read-modify-write each VM's metadata (`setMetadata`, guarded by its fingerprint:
        a change made meanwhile is read again, not overwritten)."""
        project = parts(name)[0]
        for vm in self._vms(name):
            path = str(vm.get("selfLink", "")).split("/compute/", 1)[-1].split("/", 1)[-1]
            subject = f"instance '{vm.get('name')}'"
            for _attempt in range(5):
                md = vm.get("metadata") or {}
                items = {str(i.get("key")): str(i.get("value", "")) for i in md.get("items") or []}
                wanted = change(items)
                if wanted is None:
                    break
                body = {
                    "fingerprint": md.get("fingerprint", ""),
                    "items": [{"key": k, "value": v} for k, v in wanted.items()],
                }
                try:
                    self._wait(
                        self._call(
                            "POST",
                            f"{path}/setMetadata",
                            subject,
                            project,
                            json=body,
                            params=compute_wire.once(),
                        ),
                        f"the metadata of {subject}",
                    )
                    break
                except PreconditionFailedError:
                    vm = self._call("GET", path, subject, project)  # changed meanwhile
            else:
                raise CloudError(f"the metadata of {subject} kept changing; try again")
        return self.get_node(name)

    def operation_status(self, name: str, subject: str) -> OperationStatus:
        project, zone, op_name = parts(name)
        if SLICE_OP in op_name:
            mig_op, slice_name = op_name.split(SLICE_OP)
            return self._slice_status(project, zone, mig_op, slice_name, subject)
        op = self._call(
            "GET",
            f"projects/{project}/zones/{zone}/operations/{op_name}",
            f"operation {op_name}",
            project,
        )
        return OperationStatus(
            op.get("status") == "DONE", compute_wire.operation_error(op, subject)
        )

    def _slice_status(
        self, project: str, zone: str, op_name: str, name: str, subject: str
    ) -> OperationStatus:
        """A slice's create: done once the MIG exists and all its VMs run; the first VM
        the group could not make (no capacity, no quota) fails it."""
        op = self._call(
            "GET",
            f"projects/{project}/zones/{zone}/operations/{op_name}",
            f"operation {op_name}",
            project,
        )
        error = compute_wire.operation_error(op, subject)
        if op.get("status") != "DONE" or error is not None:
            return OperationStatus(op.get("status") == "DONE", error)
        mig = compute_slice.paths(project, zone, name)[0]
        managed = self._managed(mig, project)
        error = slice_state.capacity_error(managed, subject)
        group = self._call("GET", mig, f"managed instance group {name}", project)
        running = [m for m in managed if m.get("instanceStatus") == "RUNNING"]
        whole = len(running) == group.get("targetSize")
        if error is None and not running and slice_state.waits_in_bulk(group):
            error = self.wait_ended(project, zone, group, subject)
        return OperationStatus(error is not None or whole, error)

    def wait_ended(
        self, project: str, zone: str, group: dict[str, Any], subject: str
    ) -> TpuctlError | None:
        """No capacity, once the flex-start slice `group` has waited for it as long as its
        template allows (`compute_slice.WAIT_FOR`); None before, or with no such wait."""
        template = compute_slice.paths(project, zone, str(group.get("name", "")))[1]
        try:
            found = self._call(
                "GET", template, f"instance template of {group.get('name')}", project
            )
        except NotFoundError:
            return None
        return slice_state.wait_ended(group, found, subject)

    def whole_at_once(self, shape: SliceShape) -> bool:
        """A single-host instance becomes the node on its own; a slice's three resources
        are no node until all its VMs run (an unfinished create is undone)."""
        return not shape.multi_host
