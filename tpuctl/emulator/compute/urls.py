"""Compute Engine's REST paths (v1, beta and alpha alike: gcloud's beta and alpha
commands call `/compute/beta/...` and `/compute/alpha/...` with the same override), each
to the `ComputeFront` method that answers it."""

from __future__ import annotations

from tpuctl.emulator.compute.front import ComputeFront
from tpuctl.emulator.compute.group_front import GroupFront
from tpuctl.emulator.core.routes import OnFront, Route

_P = r"/compute/(?P<version>v1|beta|alpha)/projects/(?P<project>[^/]+)"
_Z = _P + r"/zones/(?P<zone>[^/]+)"
_I = _Z + r"/instances/(?P<name>[^/]+)"
_O = _Z + r"/operations/(?P<op>[^/]+)"
_R = _P + r"/regions/(?P<region>[^/]+)"
_VPZ = ("version", "project", "zone")
_VPR = ("version", "project", "region")
_RP = _R + r"/resourcePolicies"
_GT = _P + r"/global/instanceTemplates"
_RT = _R + r"/instanceTemplates"
_MIG = _Z + r"/instanceGroupManagers"
_N = r"/(?P<name>[^/]+)"
_ID = "?requestId"  # a mutating method's: a retry with it gets the first operation (changes.once)


def _c(method: str) -> OnFront:
    return OnFront(ComputeFront, method)


def _g(method: str) -> OnFront:
    return OnFront(GroupFront, method)


ROUTES: list[Route] = [
    (
        "GET",
        _P + "/aggregated/instances",
        "compute.instances.aggregatedList",
        _c("aggregated"),
        ("version", "project", "query"),
    ),
    ("GET", _Z + "/instances", "compute.instances.list", _c("list"), (*_VPZ, "query")),
    (
        "POST",
        _Z + "/instances",
        "compute.instances.insert",
        _c("insert"),
        (*_VPZ, "body", _ID, "?sourceInstanceTemplate"),
    ),
    ("GET", _I, "compute.instances.get", _c("get"), (*_VPZ, "name")),
    ("DELETE", _I, "compute.instances.delete", _c("delete"), (*_VPZ, "name", _ID)),
    ("POST", _I + "/stop", "compute.instances.stop", _c("stop"), (*_VPZ, "name", _ID)),
    ("POST", _I + "/start", "compute.instances.start", _c("start"), (*_VPZ, "name", _ID)),
    (
        "POST",
        _I + "/simulateMaintenanceEvent",
        "compute.instances.simulateMaintenanceEvent",
        _c("simulate_maintenance_event"),
        (*_VPZ, "name", _ID),
    ),
    (
        "POST",
        _I + "/performMaintenance",
        "compute.instances.performMaintenance",
        _c("perform_maintenance"),
        (*_VPZ, "name", _ID),
    ),
    (
        "POST",
        _I + "/setLabels",
        "compute.instances.setLabels",
        _c("set_labels"),
        (*_VPZ, "name", "body", _ID),
    ),
    (
        "POST",
        _I + "/setMetadata",
        "compute.instances.setMetadata",
        _c("set_metadata"),
        (*_VPZ, "name", "body", _ID),
    ),
    (
        "GET",
        _I + "/getGuestAttributes",
        "compute.instances.getGuestAttributes",
        _c("guest_attributes"),
        (*_VPZ, "name", "?queryPath"),
    ),
    ("GET", _O, "compute.zoneOperations.get", _c("get_operation"), (*_VPZ, "op")),
    (
        "GET",
        _Z + "/operations",
        "compute.zoneOperations.list",
        _c("list_operations"),
        (*_VPZ, "query"),
    ),
    ("POST", _O + "/wait", "compute.zoneOperations.wait", _c("wait_operation"), (*_VPZ, "op")),
    (
        "GET",
        _Z + "/machineTypes",
        "compute.machineTypes.list",
        _c("list_machine_types"),
        (*_VPZ, "query"),
    ),
    (
        "GET",
        _Z + "/machineTypes/(?P<type>[^/]+)",
        "compute.machineTypes.get",
        _c("get_machine_type"),
        (*_VPZ, "type"),
    ),
    (
        "GET",
        _P + "/global/images/family/(?P<family>[^/]+)",
        "compute.images.getFromFamily",
        _c("get_image_from_family"),
        ("version", "project", "family"),
    ),
    (
        "GET",
        _P + "/global/images/(?P<image>[^/]+)",
        "compute.images.get",
        _c("get_image"),
        ("version", "project", "image"),
    ),
    # a multi-host slice: workload policy, instance template, managed instance group
    ("POST", _RP, "compute.resourcePolicies.insert", _g("insert_policy"), (*_VPR, "body", _ID)),
    ("GET", _RP, "compute.resourcePolicies.list", _g("list_policies"), (*_VPR, "query")),
    ("GET", _RP + _N, "compute.resourcePolicies.get", _g("get_policy"), (*_VPR, "name")),
    (
        "DELETE",
        _RP + _N,
        "compute.resourcePolicies.delete",
        _g("delete_policy"),
        (*_VPR, "name", _ID),
    ),
    (
        "GET",
        _P + "/aggregated/resourcePolicies",
        "compute.resourcePolicies.aggregatedList",
        _g("aggregated_policies"),
        ("version", "project", "query"),
    ),
    (
        "POST",
        _GT,
        "compute.instanceTemplates.insert",
        _g("insert_template"),
        ("version", "project", "body", _ID),
    ),
    (
        "GET",
        _GT,
        "compute.instanceTemplates.list",
        _g("list_templates"),
        ("version", "project", "query"),
    ),
    (
        "GET",
        _GT + _N,
        "compute.instanceTemplates.get",
        _g("get_template"),
        ("version", "project", "name"),
    ),
    (
        "DELETE",
        _GT + _N,
        "compute.instanceTemplates.delete",
        _g("delete_template"),
        ("version", "project", "name", _ID),
    ),
    (
        "GET",
        _P + "/aggregated/instanceTemplates",
        "compute.instanceTemplates.aggregatedList",
        _g("aggregated_templates"),
        ("version", "project", "query"),
    ),
    (
        "POST",
        _RT,
        "compute.regionInstanceTemplates.insert",
        _g("insert_region_template"),
        (*_VPR, "body", _ID),
    ),
    (
        "GET",
        _RT,
        "compute.regionInstanceTemplates.list",
        _g("list_region_templates"),
        (*_VPR, "query"),
    ),
    (
        "GET",
        _RT + _N,
        "compute.regionInstanceTemplates.get",
        _g("get_region_template"),
        (*_VPR, "name"),
    ),
    (
        "DELETE",
        _RT + _N,
        "compute.regionInstanceTemplates.delete",
        _g("delete_region_template"),
        (*_VPR, "name", _ID),
    ),
    (
        "POST",
        _MIG,
        "compute.instanceGroupManagers.insert",
        _g("insert_group"),
        (*_VPZ, "body", _ID),
    ),
    ("GET", _MIG, "compute.instanceGroupManagers.list", _g("list_groups"), (*_VPZ, "query")),
    ("GET", _MIG + _N, "compute.instanceGroupManagers.get", _g("get_group"), (*_VPZ, "name")),
    (
        "DELETE",
        _MIG + _N,
        "compute.instanceGroupManagers.delete",
        _g("delete_group"),
        (*_VPZ, "name", _ID),
    ),
    (
        "POST",
        _MIG + _N + "/listManagedInstances",
        "compute.instanceGroupManagers.listManagedInstances",
        _g("list_managed"),
        (*_VPZ, "name"),
    ),
    (
        "GET",
        _P + "/aggregated/instanceGroupManagers",
        "compute.instanceGroupManagers.aggregatedList",
        _g("aggregated_groups"),
        ("version", "project", "query"),
    ),
    (
        "GET",
        _Z + "/instanceGroups",
        "compute.instanceGroups.list",
        _g("list_instance_groups"),
        (*_VPZ, "query"),
    ),
    (
        "GET",
        _Z + "/instanceGroups" + _N,
        "compute.instanceGroups.get",
        _g("get_instance_group"),
        (*_VPZ, "name"),
    ),
    (
        "GET",
        _Z + "/autoscalers",
        "compute.autoscalers.list",
        _g("list_autoscalers"),
        (*_VPZ, "query"),
    ),
    (
        "GET",
        _P + "/aggregated/autoscalers",
        "compute.autoscalers.aggregatedList",
        _g("aggregated_autoscalers"),
        ("version", "project", "query"),
    ),
    (
        "GET",
        _R + "/operations/(?P<op>[^/]+)",
        "compute.regionOperations.get",
        _g("get_region_operation"),
        (*_VPR, "op"),
    ),
    (
        "POST",
        _R + "/operations/(?P<op>[^/]+)/wait",
        "compute.regionOperations.wait",
        _g("wait_region_operation"),
        (*_VPR, "op"),
    ),
    (
        "GET",
        _P + "/global/operations/(?P<op>[^/]+)",
        "compute.globalOperations.get",
        _g("get_global_operation"),
        ("version", "project", "op"),
    ),
    (
        "POST",
        _P + "/global/operations/(?P<op>[^/]+)/wait",
        "compute.globalOperations.wait",
        _g("wait_global_operation"),
        ("version", "project", "op"),
    ),
]
