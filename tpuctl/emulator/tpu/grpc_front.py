"""The Cloud TPU API over gRPC, google-cloud-tpu's default transport (and the only one of
its v2alpha1 client): `google.cloud.tpu.v2.Tpu`, the queued-resource methods of
`google.cloud.tpu.v2alpha1.Tpu`, and the `google.longrunning.Operations` and
`google.cloud.location.Locations` mixins the clients call on the same channel.

Each RPC is transcoded into its REST form by the HTTP rule the API declares for it (the
`google.api.http` options of `google/cloud/tpu/v2/cloud_tpu.proto`, as the client
libraries' REST transports carry them in `transports/rest_base.py`): path fields into
the path, the body field into the body, the rest into the query. The REST call then
goes through the same front end as the HTTP server's (`api_call.call`: counting, faults,
the access gate, the backend), and its proto3 JSON answer is parsed into the response
message with `json_format.ParseDict(..., ignore_unknown_fields=False)`: a field the
message lacks is an emulator bug, answered INTERNAL. An `ApiError` becomes its canonical
gRPC status with the same message and its details (ErrorInfo, ResourceInfo, BadRequest,
QuotaFailure) in `grpc-status-details-bin`, where google-api-core reads them.

v2alpha1 shares v2's wire format but for a few names: its answers carry v2alpha1 type
URLs and `multiNodeParams` for v2's `multisliceParams`. The operations it starts are
remembered (in memory) so that `GetOperation` answers them in v2alpha1 types too; the
backend keeps one operation store for both versions, as it keeps one REST API.
"""

from __future__ import annotations

import re
import threading
import traceback
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from tpuctl.emulator.core import api_call
from tpuctl.emulator.core.backend import BackendCore
from tpuctl.emulator.core.errors import ApiError
from tpuctl.emulator.core.grpc_server import GrpcFront
from tpuctl.emulator.tpu.versions import from_alpha, to_alpha

V2 = "google.cloud.tpu.v2.Tpu"
V2ALPHA1 = "google.cloud.tpu.v2alpha1.Tpu"
OPERATIONS = "google.longrunning.Operations"
LOCATIONS = "google.cloud.location.Locations"


@dataclass(frozen=True)
class Rpc:
    """One RPC and its HTTP rule: `uri` names request fields by their JSON names, each
    with the pattern its value must match; `body` is "", "*" or a field's JSON name."""

    method: str
    request: str
    response: str
    http: str
    uri: str
    body: str = ""


_ZONE = "projects/*/locations/*"
_NODE = _ZONE + "/nodes/*"
_QR = _ZONE + "/queuedResources/*"
_OP = "Operation"  # google.longrunning.Operation
NODE_RPCS = (
    Rpc(
        "ListNodes", "ListNodesRequest", "ListNodesResponse", "GET", f"/v2/{{parent={_ZONE}}}/nodes"
    ),
    Rpc("GetNode", "GetNodeRequest", "Node", "GET", f"/v2/{{name={_NODE}}}"),
    Rpc("CreateNode", "CreateNodeRequest", _OP, "POST", f"/v2/{{parent={_ZONE}}}/nodes", "node"),
    Rpc("DeleteNode", "DeleteNodeRequest", _OP, "DELETE", f"/v2/{{name={_NODE}}}"),
    Rpc("StopNode", "StopNodeRequest", _OP, "POST", f"/v2/{{name={_NODE}}}:stop", "*"),
    Rpc("StartNode", "StartNodeRequest", _OP, "POST", f"/v2/{{name={_NODE}}}:start", "*"),
    Rpc("UpdateNode", "UpdateNodeRequest", _OP, "PATCH", f"/v2/{{node.name={_NODE}}}", "node"),
    Rpc(
        "GetGuestAttributes",
        "GetGuestAttributesRequest",
        "GetGuestAttributesResponse",
        "POST",
        f"/v2/{{name={_NODE}}}:getGuestAttributes",
        "*",
    ),
    Rpc(
        "ListAcceleratorTypes",
        "ListAcceleratorTypesRequest",
        "ListAcceleratorTypesResponse",
        "GET",
        f"/v2/{{parent={_ZONE}}}/acceleratorTypes",
    ),
    Rpc(
        "GetAcceleratorType",
        "GetAcceleratorTypeRequest",
        "AcceleratorType",
        "GET",
        f"/v2/{{name={_ZONE}/acceleratorTypes/*}}",
    ),
    Rpc(
        "ListRuntimeVersions",
        "ListRuntimeVersionsRequest",
        "ListRuntimeVersionsResponse",
        "GET",
        f"/v2/{{parent={_ZONE}}}/runtimeVersions",
    ),
    Rpc(
        "GetRuntimeVersion",
        "GetRuntimeVersionRequest",
        "RuntimeVersion",
        "GET",
        f"/v2/{{name={_ZONE}/runtimeVersions/*}}",
    ),
)
QUEUED_RPCS = (
    Rpc(
        "ListQueuedResources",
        "ListQueuedResourcesRequest",
        "ListQueuedResourcesResponse",
        "GET",
        f"/v2/{{parent={_ZONE}}}/queuedResources",
    ),
    Rpc(
        "GetQueuedResource",
        "GetQueuedResourceRequest",
        "QueuedResource",
        "GET",
        f"/v2/{{name={_QR}}}",
    ),
    Rpc(
        "CreateQueuedResource",
        "CreateQueuedResourceRequest",
        _OP,
        "POST",
        f"/v2/{{parent={_ZONE}}}/queuedResources",
        "queuedResource",
    ),
    Rpc(
        "DeleteQueuedResource", "DeleteQueuedResourceRequest", _OP, "DELETE", f"/v2/{{name={_QR}}}"
    ),
)
# the mixins, with the HTTP rules of the TPU API's service config
OPERATION_RPCS = (
    Rpc("GetOperation", "GetOperationRequest", _OP, "GET", f"/v2/{{name={_ZONE}/operations/*}}"),
    Rpc(
        "ListOperations",
        "ListOperationsRequest",
        "ListOperationsResponse",
        "GET",
        f"/v2/{{name={_ZONE}}}/operations",
    ),
    Rpc(
        "DeleteOperation",
        "DeleteOperationRequest",
        "Empty",
        "DELETE",
        f"/v2/{{name={_ZONE}/operations/*}}",
    ),
    Rpc(
        "CancelOperation",
        "CancelOperationRequest",
        "Empty",
        "POST",
        f"/v2/{{name={_ZONE}/operations/*}}:cancel",
    ),
)
LOCATION_RPCS = (
    Rpc(
        "ListLocations",
        "ListLocationsRequest",
        "ListLocationsResponse",
        "GET",
        "/v2/{name=projects/*}/locations",
    ),
    Rpc("GetLocation", "GetLocationRequest", "Location", "GET", f"/v2/{{name={_ZONE}}}"),
)

_FIELD = re.compile(r"\{([\w.]+)=([^}]+)\}")


def template_pattern(template: str) -> re.Pattern[str]:
    parts = (
        "[^/]+" if s == "*" else ".+" if s == "**" else re.escape(s) for s in template.split("/")
    )
    return re.compile("/".join(parts))


def _pop(data: dict[str, Any], dotted: str) -> str:
    *outer, last = dotted.split(".")
    holder = data
    for key in outer:
        holder = holder.get(key) or {}
    value = holder.pop(last, "") if isinstance(holder, dict) else ""
    return str(value)


def _query_value(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def transcode(rpc: Rpc, data: dict[str, Any]) -> tuple[str, dict[str, str], dict[str, Any]]:
    """The REST path, query and body of a request (its proto3 JSON `data`, consumed)."""

    def expand(match: re.Match[str]) -> str:
        field, template = match[1], match[2]
        value = _pop(data, field)
        if not template_pattern(template).fullmatch(value):
            # The REST clients refuse such a request before sending it; over gRPC the
            # server does. The wording is the emulator's.
            raise invalid_field(field, value, template)
        return quote(value, safe="/")

    path = _FIELD.sub(expand, rpc.uri)
    body: dict[str, Any] = {}
    if rpc.body == "*":
        body, data = data, {}
    elif rpc.body:
        body = data.pop(rpc.body, None) or {}
    query = {k: _query_value(v) for k, v in data.items() if not isinstance(v, dict | list)}
    return path, query, body


def invalid_field(field: str, value: str, template: str) -> ApiError:
    from tpuctl.emulator.core import errors

    return errors.invalid_argument(
        f"Invalid resource field value in the request: {field} '{value}' does not match "
        f"'{template}'.",
        field,
    )


def abort(context: Any, exc: ApiError) -> None:
    """End the call with the error's canonical status, message and details."""
    import grpc
    from google.protobuf import any_pb2, json_format
    from google.rpc import error_details_pb2, status_pb2  # noqa: F401 (the details' types)

    code = grpc.StatusCode.__members__.get(exc.status, grpc.StatusCode.UNKNOWN)
    try:
        from grpc_status import rpc_status
    except ImportError:  # grpcio-status comes with google-api-core[grpc]; without it, less
        context.abort(code, exc.message)
        return
    status = status_pb2.Status(code=code.value[0], message=exc.message)
    for detail in exc.details:
        try:
            status.details.append(json_format.ParseDict(detail, any_pb2.Any()))
        except json_format.ParseError:
            continue  # a detail type this process does not know: left out
    context.abort_with_status(rpc_status.to_status(status))


class TpuGrpc(GrpcFront):
    """Serves the TPU API's RPCs on host:port (0: a free one)."""

    thread_prefix = "tpu-grpc"

    def __init__(self, backend: BackendCore, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(host, port)
        self.backend = backend
        self._alpha_ops: set[str] = set()  # operations v2alpha1 calls started
        self._lock = threading.Lock()

    def handlers(self) -> list[Any]:
        import grpc
        from google.cloud import tpu_v2, tpu_v2alpha1
        from google.cloud.location import locations_pb2
        from google.longrunning import operations_pb2
        from google.protobuf import empty_pb2

        def message(module: Any, name: str) -> Any:
            if name == _OP:
                return operations_pb2.Operation
            if name == "Empty":
                return empty_pb2.Empty
            found = getattr(module, name)
            return found.pb() if hasattr(found, "pb") else found

        services = (
            (V2, tpu_v2, NODE_RPCS + QUEUED_RPCS, "v2"),
            (V2ALPHA1, tpu_v2alpha1, QUEUED_RPCS, "v2alpha1"),
            (OPERATIONS, operations_pb2, OPERATION_RPCS, "mixin"),
            (LOCATIONS, locations_pb2, LOCATION_RPCS, "mixin"),
        )
        handlers = []
        for service, module, rpcs, version in services:
            methods = {}
            for rpc in rpcs:
                request, response = message(module, rpc.request), message(module, rpc.response)
                methods[rpc.method] = grpc.unary_unary_rpc_method_handler(
                    self._serve(rpc, response, version),
                    request_deserializer=request.FromString,
                    response_serializer=response.SerializeToString,
                )
            handlers.append(grpc.method_handlers_generic_handler(service, methods))
        return handlers

    def _serve(self, rpc: Rpc, response: Any, version: str) -> Any:
        from google.protobuf import json_format

        def handle(request: Any, context: Any) -> Any:
            try:
                try:
                    data = json_format.MessageToDict(request)
                except json_format.SerializeToJsonError as exc:  # e.g. a mask path `aB`
                    raise ApiError(400, "INVALID_ARGUMENT", f"Invalid request: {exc}") from None
                if version == "v2alpha1":
                    data = from_alpha(data)
                metadata = dict(context.invocation_metadata() or ())
                answer = self._call(rpc, data, metadata.get("authorization"))
                answer = self._versioned(rpc, answer, version)
                try:
                    return json_format.ParseDict(answer, response(), ignore_unknown_fields=False)
                except json_format.ParseError as exc:
                    raise ApiError(500, "INTERNAL", f"emulator bug: {exc}") from None
            except ApiError as exc:
                abort(context, exc)
            except Exception as exc:  # a bug here must still answer, in Google's shape
                traceback.print_exc()
                abort(context, ApiError(500, "INTERNAL", f"emulator bug: {exc!r}"))
            return None  # not reached: abort raises

        return handle

    def _call(self, rpc: Rpc, data: dict[str, Any], authorization: str | None = None) -> Any:
        path, query, body = transcode(rpc, data)
        target = f"{path}?{urlencode(query)}" if query else path
        return api_call.call(self.backend, rpc.http, path, query, body, target, authorization)

    def _versioned(self, rpc: Rpc, answer: Any, version: str) -> Any:
        """The answer in the names of the API version that is asked (or that started the
        operation, for the operations mixin)."""
        if version == "v2alpha1":
            if rpc.response == _OP:
                with self._lock:
                    self._alpha_ops.add(str(answer.get("name")))
            return to_alpha(answer)
        if rpc.method == "GetOperation" and self._alpha(answer):
            return to_alpha(answer)
        if rpc.method == "ListOperations":
            ops = [to_alpha(op) if self._alpha(op) else op for op in answer.get("operations", [])]
            return {**answer, "operations": ops} if ops else answer
        return answer

    def _alpha(self, op: dict[str, Any]) -> bool:
        with self._lock:
            return op.get("name") in self._alpha_ops
