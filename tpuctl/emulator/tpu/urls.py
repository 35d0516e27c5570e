"""The Cloud TPU v2 REST paths (nodes, operations, queued resources, the catalogue), each
to the front method (`front.TpuFront`) or catalogue function that answers it; and the
same paths under `/v2alpha1`, which gcloud alpha's `compute tpus` calls, answered by the
same methods in v2alpha1's names (`front.TpuAlphaFront`)."""

from __future__ import annotations

from tpuctl.emulator.core.routes import OnFront, Route
from tpuctl.emulator.tpu import catalog_api
from tpuctl.emulator.tpu.front import TpuAlphaFront, TpuFront

_P = r"/v2/projects/(?P<project>[^/]+)/locations"
_Z = _P + r"/(?P<zone>[^/:]+)"
_N = _Z + r"/nodes/(?P<node>[^/:]+)"
_O = _Z + r"/operations/(?P<op>[^/:]+)"
_QR = _Z + r"/queuedResources"
# gcloud's `compute tpus locations` and `accelerator-types` groups still call v1 for these
_P1 = r"/v[12]/projects/(?P<project>[^/]+)/locations"
_Z1 = _P1 + r"/(?P<zone>[^/:]+)"
_PZ = ("project", "zone")


def _tpu(method: str) -> OnFront:
    return OnFront(TpuFront, method)


ROUTES: list[Route] = [
    ("GET", _P1, "locations.list", catalog_api.list_locations, ("project", "paging")),
    ("GET", _Z1, "locations.get", catalog_api.get_location, _PZ),
    ("GET", _Z + "/nodes", "list", _tpu("list_nodes"), (*_PZ, "paging")),
    ("POST", _Z + "/nodes", "create", _tpu("create_node"), (*_PZ, "?nodeId", "body")),
    ("GET", _N, "get", _tpu("get_node"), (*_PZ, "node")),
    ("DELETE", _N, "delete", _tpu("delete_node"), (*_PZ, "node")),
    ("PATCH", _N, "patch", _tpu("update_node"), (*_PZ, "node", "?updateMask", "body")),
    ("POST", _N + ":stop", "stop", _tpu("stop_node"), (*_PZ, "node", "body")),
    ("POST", _N + ":start", "start", _tpu("start_node"), (*_PZ, "node", "body")),
    (
        "POST",
        _N + ":getGuestAttributes",
        "getGuestAttributes",
        _tpu("get_guest_attributes"),
        (*_PZ, "node", "body"),
    ),
    ("GET", _QR, "queuedResources.list", _tpu("list_queued_resources"), (*_PZ, "paging")),
    (
        "POST",
        _QR,
        "queuedResources.create",
        _tpu("create_queued_resource"),
        (*_PZ, "?queuedResourceId", "body"),
    ),
    (
        "GET",
        _QR + "/(?P<qr>[^/:]+)",
        "queuedResources.get",
        _tpu("get_queued_resource"),
        (*_PZ, "qr"),
    ),
    (
        "DELETE",
        _QR + "/(?P<qr>[^/:]+)",
        "queuedResources.delete",
        _tpu("delete_queued_resource"),
        (*_PZ, "qr", "?force"),
    ),
    ("GET", _Z + "/operations", "operations.list", _tpu("list_operations"), (*_PZ, "paging")),
    ("GET", _O, "operations.get", _tpu("get_operation"), (*_PZ, "op")),
    ("DELETE", _O, "operations.delete", _tpu("delete_operation"), (*_PZ, "op")),
    ("POST", _O + ":cancel", "operations.cancel", _tpu("cancel_operation"), (*_PZ, "op")),
    (
        "GET",
        _Z1 + "/acceleratorTypes",
        "acceleratorTypes.list",
        catalog_api.list_accelerator_types,
        (*_PZ, "paging"),
    ),
    (
        "GET",
        _Z1 + "/acceleratorTypes/(?P<type>[^/:]+)",
        "acceleratorTypes.get",
        catalog_api.get_accelerator_type,
        (*_PZ, "type"),
    ),
    (
        "GET",
        _Z + "/runtimeVersions",
        "runtimeVersions.list",
        catalog_api.list_runtime_versions,
        (*_PZ, "paging"),
    ),
    (
        "GET",
        _Z + "/runtimeVersions/(?P<version>[^/:]+)",
        "runtimeVersions.get",
        catalog_api.get_runtime_version,
        (*_PZ, "version"),
    ),
]


def _alpha(route: Route) -> Route:
    """A v2 route as v2alpha1 serves it: the same path under /v2alpha1, the same verb."""
    method, path, verb, target, spec = route
    path = path.replace("/v2/", "/v2alpha1/", 1).replace("/v[12]/", "/v2alpha1/", 1)
    if isinstance(target, OnFront):
        target = OnFront(TpuAlphaFront, target.method)
    return method, path, verb, target, spec


ROUTES += [_alpha(route) for route in ROUTES]
# v2alpha1's own node methods (tpu.v2alpha1.json; v2 has neither): tpu/maintenance.py
_NA = _N.replace("/v2/", "/v2alpha1/", 1)
ROUTES += [
    (
        "POST",
        _NA + ":performMaintenance",
        "performMaintenance",
        OnFront(TpuAlphaFront, "perform_maintenance"),
        (*_PZ, "node"),
    ),
    (
        "POST",
        _NA + ":simulateMaintenanceEvent",
        "simulateMaintenanceEvent",
        OnFront(TpuAlphaFront, "simulate_maintenance_event"),
        (*_PZ, "node", "body"),
    ),
]
