"""TpuApi: the adapter over the Cloud TPU v2 API, the first implementation of the
backend protocol (`cloud/backend.py`).

Every call goes through `_call` (`transport.py`, with the client, the REST session and
the operations), the one seam that retries transient faults and translates Google's
exceptions into tpuctl's errors. Nodes cross this boundary as `tpuctl.models.Node`, never
as protobuf messages or JSON; the request bodies and the reading of answers are
`wire.py`'s; its rules and quota, `rules.py`'s.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tpuctl.catalog.shapes import SliceShape
from tpuctl.cloud.tpu import wire as tpu_wire
from tpuctl.cloud.tpu.rules import TpuRules
from tpuctl.cloud.tpu.transport import TIMEOUT, TpuTransport, subject_of, to_dict
from tpuctl.errors import CloudError, NotFoundError
from tpuctl.models import CreateSpec, Node, OperationStatus, QueuedResource, QueueSpec
from tpuctl.waiting import poll_until


class TpuApi(TpuTransport, TpuRules):
    """The Cloud TPU v2 API as tpuctl uses it."""

    # -- nodes --------------------------------------------------------------
    def get_node(self, name: str) -> Node:
        if self._session is not None:  # REST: google-cloud-tpu's v2 Node lacks some fields
            return tpu_wire.node_from_json(self._rest("GET", f"v2/{name}", subject_of(name)))
        node = self._call(
            subject_of(name), lambda: self._client.get_node(name=name, timeout=TIMEOUT)
        )
        return tpu_wire.node_from_json(to_dict(node))

    def list_nodes(self, parent: str) -> list[Node]:
        subject = f"nodes in {parent}"
        if self._session is not None:  # REST: the same JSON, without google-cloud-tpu
            return [tpu_wire.node_from_json(n) for n in self._rest_list(parent, "nodes", subject)]

        def fetch() -> list[Node]:
            pager = self._client.list_nodes(parent=parent, timeout=TIMEOUT)
            return [tpu_wire.node_from_json(to_dict(n)) for n in pager]

        return self._call(subject, fetch)

    def create_node(self, parent: str, spec: CreateSpec) -> str | None:
        """Start creating a node; returns the operation name, or None when adopted.

        A create whose answer was lost (timeout, 5xx after the fact) is retried;
        the retry then meets ALREADY_EXISTS for the node the first attempt made.
        That node is adopted when it is the one we asked for, never duplicated.
        """
        from google.api_core import exceptions as gx
        from google.cloud import tpu_v2

        body = tpu_wire.node_body(spec)
        node = tpu_v2.Node.from_json(json.dumps(body), ignore_unknown_fields=True)
        node_id, attempts = spec.name, 0

        def create() -> str | None:
            nonlocal attempts
            attempts += 1
            try:
                op = self._client.create_node(
                    parent=parent, node_id=node_id, node=node, timeout=TIMEOUT
                )
            except gx.Conflict:
                existing = f"{parent}/nodes/{node_id}"
                if attempts > 1 and tpu_wire.same_node(self.get_node(existing), spec):
                    return None
                raise
            return str(op.operation.name)

        return self._call(subject_of(f"{parent}/nodes/{node_id}"), create)

    def _transition(self, name: str, call: Callable[[], Any], settled: set[str]) -> str | None:
        """Start a delete/stop/start; returns the operation name, or None when already done.

        These can succeed on the server while the answer is lost, and another client
        (a second gc run, a colleague) may have asked for the same thing: the call is
        then refused (FAILED_PRECONDITION, or NOT_FOUND for a delete). When the node
        is already where we wanted to send it, that refusal is success.
        """
        from google.api_core import exceptions as gx

        def once() -> str | None:
            try:
                return str(call().operation.name)
            except gx.NotFound:
                if "DELETING" in settled:
                    return None
                raise
            except (gx.BadRequest, gx.Conflict):
                try:
                    state = self.get_node(name).state
                except NotFoundError:
                    state = "DELETING"  # gone already
                if state in settled:
                    return None
                raise

        return self._call(subject_of(name), once)

    def delete_node(self, name: str) -> str | None:
        return self._transition(
            name,
            lambda: self._client.delete_node(request={"name": name}, timeout=TIMEOUT),
            {"DELETING"},
        )

    def stop_node(self, name: str) -> str | None:
        return self._transition(
            name,
            lambda: self._client.stop_node(request={"name": name}, timeout=TIMEOUT),
            {"STOPPING", "STOPPED"},
        )

    def start_node(self, name: str) -> str | None:
        return self._transition(
            name,
            lambda: self._client.start_node(request={"name": name}, timeout=TIMEOUT),
            {"STARTING", "READY"},
        )

    def perform_maintenance(self, name: str) -> str | None:
        """Start the node's pending maintenance now: the TPU API's v2alpha1
        `nodes.performMaintenance` (v2 has no such method:
        https://cloud.google.com/tpu/docs/reference/rest/v2alpha1/projects.locations.nodes/performMaintenance),
        over REST; the operation's name."""
        if self._session is None:
            raise CloudError("starting a maintenance needs the TPU API's REST endpoint")
        op = self._rest("POST", f"v2alpha1/{name}:performMaintenance", subject_of(name), json={})
        return str(op.get("name") or "") or None

    def set_labels(self, name: str, labels: dict[str, str]) -> str:
        """Replace the node's labels (the API takes the whole map); the operation's name."""
        return self._update_node(name, {"labels": labels}, ["labels"])

    def _update_node(self, name: str, fields: dict[str, Any], mask: list[str]) -> str:
        """Patch `fields` (JSON form, e.g. {"labels": {...}}) named by `mask`."""
        from google.cloud import tpu_v2
        from google.protobuf import field_mask_pb2

        node = tpu_v2.Node.from_json(json.dumps({"name": name, **fields}))
        op = self._call(
            subject_of(name),
            lambda: self._client.update_node(
                node=node, update_mask=field_mask_pb2.FieldMask(paths=mask), timeout=TIMEOUT
            ),
        )
        return str(op.operation.name)

    def patch_metadata(
        self,
        name: str,
        change: Callable[[dict[str, str]], dict[str, str] | None],
        attempts: int = 10,
    ) -> Node:
        """Read-modify-write the node's metadata: `change` gets the current metadata and
        returns the new one, or None when nothing needs changing. A concurrent update
        (409, FAILED_PRECONDITION, ABORTED, or a write that lost to another one and is
        gone when read back) is retried from a fresh read. Returns the node as it ends."""
        subject = subject_of(name)

        def check() -> tuple[Node | None, str]:
            node = self.get_node(name)
            wanted = change(dict(node.metadata))
            if wanted is None:
                return node, "SETTLED"

            def patch() -> str | None:
                from google.api_core import exceptions as gx
                from google.cloud import tpu_v2
                from google.protobuf import field_mask_pb2

                body = tpu_v2.Node.from_json(json.dumps({"name": name, "metadata": wanted}))
                try:
                    op = self._client.update_node(
                        node=body,
                        update_mask=field_mask_pb2.FieldMask(paths=["metadata"]),
                        timeout=TIMEOUT,
                    )
                except (gx.Conflict, gx.FailedPrecondition, gx.Aborted):
                    return None  # someone else changed the node: start again
                return str(op.operation.name)

            operation = self._call(subject, patch)
            if operation is not None:
                self._wait_operation(operation, subject)
            return None, "WRITTEN"  # the next read checks that the change held

        # The API has no fingerprint for metadata, so concurrent writers can undo each
        # other; random pauses break their lock-step until every change has landed.
        return poll_until(
            check,
            what=f"the metadata of {subject}",
            poll=0.05,
            max_poll=1.0,
            factor=2.0,
            jitter=True,
            attempts=attempts,
            timed_out=lambda state, elapsed: CloudError(
                f"could not update the metadata of {subject}: it kept changing under tpuctl",
                hint="try again in a minute",
            ),
        )

    def get_guest_attributes(self, name: str, query_path: str = "") -> list[dict[str, str]]:
        """Guest attribute items per worker, in worker order."""
        resp = self._call(
            subject_of(name),
            lambda: self._client.get_guest_attributes(
                request={"name": name, "query_path": query_path}, timeout=TIMEOUT
            ),
        )
        data = to_dict(resp)
        return [
            {
                f"{i.get('namespace', '')}/{i.get('key', '')}": i.get("value", "")
                for i in (ga.get("queryValue") or {}).get("items", [])
            }
            for ga in data.get("guestAttributes", [])
        ]

    # -- queued resources ---------------------------------------------------
    def create_queued_resource(
        self, parent: str, qr_id: str, spec: CreateSpec, queue: QueueSpec
    ) -> str | None:
        """Ask for a queued resource for `spec`'s node (or `queue.slices` of them); returns
        the operation name, or None when a retried create met the request its lost first
        attempt had made (adopted, never doubled; another client's request of that name is
        a conflict, never adopted)."""
        from google.api_core import exceptions as gx
        from google.cloud import tpu_v2

        body = tpu_wire.queued_body(parent, qr_id, spec, queue)
        request = tpu_v2.QueuedResource.from_json(json.dumps(body), ignore_unknown_fields=True)
        attempts = 0

        def send() -> str:
            if not queue.flex_start:
                op = self._client.create_queued_resource(
                    parent=parent,
                    queued_resource_id=qr_id,
                    queued_resource=request,
                    timeout=TIMEOUT,
                )
                return str(op.operation.name)
            return self._create_alpha(parent, qr_id, body)

        def create() -> str | None:
            nonlocal attempts
            attempts += 1
            try:
                return send()
            except gx.Conflict:
                existing = f"{parent}/queuedResources/{qr_id}"
                if attempts > 1 and tpu_wire.same_queued(
                    self.get_queued_resource(existing), spec, queue
                ):
                    return None  # the request our lost first attempt made
                raise

        return self._call(subject_of(f"{parent}/queuedResources/{qr_id}"), create)

    def get_queued_resource(self, name: str) -> QueuedResource:
        qr = self._call(
            subject_of(name), lambda: self._client.get_queued_resource(name=name, timeout=TIMEOUT)
        )
        return tpu_wire.queued_from_json(to_dict(qr))

    def list_queued_resources(self, parent: str) -> list[QueuedResource]:
        subject = f"queued resources in {parent}"
        if self._session is not None:
            found = self._rest_list(parent, "queuedResources", subject)
            return [tpu_wire.queued_from_json(q) for q in found]

        def fetch() -> list[QueuedResource]:
            pager = self._client.list_queued_resources(parent=parent, timeout=TIMEOUT)
            return [tpu_wire.queued_from_json(to_dict(q)) for q in pager]

        return self._call(subject, fetch)

    def delete_queued_resource(self, name: str, force: bool = True) -> str | None:
        """Delete a queued resource (with force: and its nodes); None when already gone."""
        from google.api_core import exceptions as gx

        def delete() -> str | None:
            try:
                op = self._client.delete_queued_resource(
                    request={"name": name, "force": force}, timeout=TIMEOUT
                )
            except gx.NotFound:
                return None
            return str(op.operation.name)

        return self._call(subject_of(name), delete)

    # -- operations ---------------------------------------------------------
    def whole_at_once(self, shape: SliceShape) -> bool:
        """A node, single- or multi-host, is one resource of the TPU API."""
        return True

    def operation_status(self, name: str, subject: str) -> OperationStatus:
        """Whether the operation is done, and the error it ended with (no capacity, quota
        and the rest told apart, `subject` naming what it was for)."""
        op = self._get_operation(name)
        return OperationStatus(bool(op.get("done")), tpu_wire.operation_error(op, subject))

    # -- catalog ------------------------------------------------------------
    def accelerator_types(self, parent: str) -> list[str]:
        def fetch() -> list[str]:
            pager = self._client.list_accelerator_types(parent=parent, timeout=TIMEOUT)
            return [a.type_ for a in pager]

        return self._call(f"zone {parent.rsplit('/', 1)[-1]}", fetch)

    def runtime_versions(self, parent: str) -> list[str]:
        def fetch() -> list[str]:
            pager = self._client.list_runtime_versions(parent=parent, timeout=TIMEOUT)
            return [r.version for r in pager]

        return self._call(f"zone {parent.rsplit('/', 1)[-1]}", fetch)

    def locations(self, project: str) -> list[str]:
        """The zones the Cloud TPU API serves for `project` (its Locations list)."""
        from google.cloud.location import locations_pb2

        def fetch() -> list[str]:
            zones: list[str] = []
            token = ""
            while True:
                asked = locations_pb2.ListLocationsRequest(
                    name=f"projects/{project}", page_token=token
                )
                answer = self._client.list_locations(request=asked, timeout=TIMEOUT)
                zones += [loc.location_id for loc in answer.locations]
                token = answer.next_page_token
                if not token:
                    return zones

        return self._call(f"the TPU locations of project {project}", fetch)
