"""The Cloud TPU v2 API's wire format: its resources rendered as the REST JSON the real
API answers (proto3 JSON: default values left out, timestamps as `core.timestamps`
writes them), and `TpuFront`, the REST methods the routes (`urls.py`) name.

A `TpuFront` method calls one `Backend` method, which answers model objects
(`models.py`), and renders the answer while it still holds the backend's lock: the
JSON is the state as the call left it, never half of a later change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tpuctl.emulator.core import maintenance
from tpuctl.emulator.core.service import Facade
from tpuctl.emulator.core.timestamps import proto_timestamp
from tpuctl.emulator.tpu import flex, schema
from tpuctl.emulator.tpu.models import WORKER_PORT, Node, Operation, Page, QueuedResource
from tpuctl.emulator.tpu.versions import from_alpha, to_alpha

NODE_TYPE = "type.googleapis.com/google.cloud.tpu.v2.Node"
QR_TYPE = "type.googleapis.com/google.cloud.tpu.v2.QueuedResource"
EMPTY_TYPE = "type.googleapis.com/google.protobuf.Empty"
METADATA_TYPE = "type.googleapis.com/google.cloud.tpu.v2.OperationMetadata"

timestamp = proto_timestamp  # the TPU API's Timestamp fields: 9 fractional digits


def render_node(node: Node, alpha: bool = False) -> dict[str, Any]:
    """The Node as the v2 REST API shows it (`alpha`: with v2alpha1's own fields, in v2's
    names: `versions.to_alpha` renames)."""
    acc = node.accelerator
    endpoints = []
    for address in node.addresses:
        endpoint: dict[str, Any] = {"ipAddress": address, "port": WORKER_PORT}
        if node.enable_external_ips:
            # The external address is the same loopback one: it is all there is here.
            endpoint["accessConfig"] = {"externalIp": address}
        endpoints.append(endpoint)
    network_config: dict[str, Any] = {
        "network": node.network,
        "subnetwork": node.subnetwork,
        "enableExternalIps": node.enable_external_ips,
        "canIpForward": node.can_ip_forward,
    }
    out: dict[str, Any] = {
        "name": node.name,
        "id": node.uid,
        "acceleratorType": acc.name,
        "acceleratorConfig": {"type": acc.config_type, "topology": acc.topology},
        "state": node.state,
        "runtimeVersion": node.runtime_version,
        "networkConfig": network_config,
        "cidrBlock": node.cidr_block,
        "serviceAccount": dict(node.service_account),
        "createTime": timestamp(node.create_time),
        "schedulingConfig": dict(node.scheduling),  # v2alpha1 adds the end, if any
        "networkEndpoints": endpoints,
        "labels": dict(node.labels),
        "metadata": dict(node.metadata),
        "tags": list(node.tags),
        "apiVersion": "V2",
        "description": node.description,
        "health": node.health or ("HEALTHY" if node.state == "READY" else ""),
        "healthDescription": node.health_description,
        "symptoms": [dict(s) for s in node.symptoms],
        "dataDisks": [dict(d) for d in node.data_disks],
        "shieldedInstanceConfig": node.shielded_instance_config,
        "queuedResource": node.queued_resource,
        "multisliceNode": node.multislice_node,
        "upcomingMaintenance": maintenance.render(node.maintenance),
    }
    if alpha and node.terminate_at is not None:
        out["schedulingConfig"]["terminationTimestamp"] = flex.termination_timestamp(
            node.terminate_at
        )
    # proto3 JSON, as the real API answers: default values are left out
    return schema.render("Node", out)


def render_queued_resource(qr: QueuedResource, alpha: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": qr.name,
        "createTime": timestamp(qr.create_time),
        **qr.request,
        **(qr.alpha if alpha else {}),
        "state": {"state": qr.state, "stateInitiator": qr.initiator},
    }
    if qr.state == "FAILED" and qr.error:
        out["state"]["failedData"] = {"error": dict(qr.error)}
    return schema.render("QueuedResource", out)


def _response(response: dict[str, Any], alpha: bool) -> dict[str, Any]:
    """A done operation's `response`, an Any, from the resource it keeps."""
    if "node" in response:
        return {"@type": NODE_TYPE, **render_node(Node.from_state(response["node"]), alpha)}
    if "queued_resource" in response:
        qr = QueuedResource.from_state(response["queued_resource"])
        return {"@type": QR_TYPE, **render_queued_resource(qr, alpha)}
    if "@type" in response:  # a state file an emulator wrote with the JSON itself
        return dict(response)
    return {"@type": EMPTY_TYPE}


def render_operation(op: Operation, alpha: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "@type": METADATA_TYPE,
        "createTime": timestamp(op.create_time),
        "target": op.target,
        "verb": op.verb,
        "apiVersion": "v2",
    }
    if op.end_time is not None:
        metadata["endTime"] = timestamp(op.end_time)
    out: dict[str, Any] = {"name": op.name, "metadata": metadata}
    if op.done:  # proto3 JSON: `done: false` is left out like any default
        out["done"] = True
    if op.error is not None:
        out["error"] = dict(op.error)
    elif op.response is not None:
        out["response"] = _response(op.response, alpha)
    return out


def render_page(
    key: str, page: Page, render: Callable[[Any], dict[str, Any]], unreachable: bool = False
) -> dict[str, Any]:
    """A list response: the page's resources under `key`, then `unreachable` (for the
    resources whose list has it) and `nextPageToken` if more."""
    out: dict[str, Any] = {key: [render(item) for item in page.items]}
    if unreachable:
        out["unreachable"] = []
    if page.next_token:
        out["nextPageToken"] = page.next_token
    return out


def render_guest_attributes(
    answer: tuple[str, list[list[dict[str, str]]]], alpha: bool = False
) -> dict[str, Any]:
    query_path, per_worker = answer
    entries = [{"queryPath": query_path, "queryValue": {"items": items}} for items in per_worker]
    return {"guestAttributes": entries}


def _nodes_page(page: Page, alpha: bool) -> dict[str, Any]:
    return render_page("nodes", page, lambda n: render_node(n, alpha), unreachable=True)


def _operations_page(page: Page, alpha: bool) -> dict[str, Any]:
    return render_page("operations", page, lambda o: render_operation(o, alpha))


def _queued_page(page: Page, alpha: bool) -> dict[str, Any]:
    render = lambda q: render_queued_resource(q, alpha)  # noqa: E731
    return render_page("queuedResources", page, render, unreachable=True)


class _Rendered:
    """A front method: the backend's method of the same name (or `name`), called with the
    request's parts, its answer rendered by `render` while the backend's lock is held.
    On the v2alpha1 front, the request's body is read and the answer written in
    v2alpha1's names (`versions`)."""

    def __init__(self, render: Callable[[Any, bool], Any], name: str = "") -> None:
        self.render = render
        self.name = name

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = self.name or name

    def __get__(self, front: TpuFront, owner: type | None = None) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if front.alpha:
                args = tuple(from_alpha(a) if isinstance(a, dict) else a for a in args)
            with front.backend.lock:  # rendered as the call left the state
                answer = self.render(
                    getattr(front.backend, self.name)(*args, **kwargs), front.alpha
                )
            return to_alpha(answer) if front.alpha else answer

        return call


class TpuFront:
    """The TPU API's REST methods over a backend: the request's parts in, JSON out."""

    alpha = False  # v2alpha1's names and fields (TpuAlphaFront)

    def __init__(self, backend: Facade) -> None:
        self.backend = backend

    create_node = _Rendered(render_operation)
    get_node = _Rendered(render_node)
    list_nodes = _Rendered(_nodes_page)
    delete_node = _Rendered(render_operation)
    stop_node = _Rendered(render_operation)
    start_node = _Rendered(render_operation)
    update_node = _Rendered(render_operation)
    get_guest_attributes = _Rendered(render_guest_attributes)
    get_operation = _Rendered(render_operation)
    list_operations = _Rendered(_operations_page)
    create_queued_resource = _Rendered(render_operation)
    get_queued_resource = _Rendered(render_queued_resource)
    list_queued_resources = _Rendered(_queued_page)
    _delete_queued_resource = _Rendered(render_operation, "delete_queued_resource")

    def delete_queued_resource(self, project: str, zone: str, qr_id: str, force: str) -> dict:
        forced = force.lower() == "true"  # the `force` query parameter
        answer: dict = self._delete_queued_resource(project, zone, qr_id, forced)
        return answer

    def delete_operation(self, project: str, zone: str, op_id: str) -> dict:
        self.get_operation(project, zone, op_id)  # NOT_FOUND for no such operation
        return {}  # operations are kept: deleting or cancelling one changes nothing here

    def cancel_operation(self, project: str, zone: str, op_id: str) -> dict:
        return self.delete_operation(project, zone, op_id)


class TpuAlphaFront(TpuFront):
    """The same methods as v2alpha1 serves them over REST (gcloud alpha's `compute tpus`):
    v2alpha1's names, and the queued-resource fields v2 lacks (`flex`)."""

    alpha = True
    perform_maintenance = _Rendered(render_operation)
    simulate_maintenance_event = _Rendered(render_operation)

    def create_queued_resource(
        self, project: str, zone: str, qr_id: str, body: dict[str, Any]
    ) -> dict:
        v2_body, extra = flex.split(body)
        answer: dict = super().create_queued_resource(project, zone, qr_id, v2_body, extra)
        return answer

    def create_node(self, project: str, zone: str, node_id: str, body: dict[str, Any]) -> dict:
        answer: dict = super().create_node(project, zone, node_id, flex.v2_node(body))
        return answer
