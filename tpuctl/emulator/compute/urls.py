"""Compute Engine's REST paths (v1, beta and alpha alike: gcloud's beta and alpha
commands call `/compute/beta/...` and `/compute/alpha/...` with the same override), each
to the `ComputeFront` method that answers it."""

from __future__ import annotations

from tpuctl.emulator.compute.front import ComputeFront
from tpuctl.emulator.core.routes import OnFront, Route

_P = r"/compute/(?P<version>v1|beta|alpha)/projects/(?P<project>[^/]+)"
_Z = _P + r"/zones/(?P<zone>[^/]+)"
_I = _Z + r"/instances/(?P<name>[^/]+)"
_O = _Z + r"/operations/(?P<op>[^/]+)"
_VPZ = ("version", "project", "zone")


def _c(method: str) -> OnFront:
    return OnFront(ComputeFront, method)


ROUTES: list[Route] = [
    ("GET", _P + "/aggregated/instances", "compute.instances.aggregatedList",
     _c("aggregated"), ("version", "project", "query")),
    ("GET", _Z + "/instances", "compute.instances.list", _c("list"), (*_VPZ, "query")),
    ("POST", _Z + "/instances", "compute.instances.insert", _c("insert"), (*_VPZ, "body")),
    ("GET", _I, "compute.instances.get", _c("get"), (*_VPZ, "name")),
    ("DELETE", _I, "compute.instances.delete", _c("delete"), (*_VPZ, "name")),
    ("POST", _I + "/stop", "compute.instances.stop", _c("stop"), (*_VPZ, "name")),
    ("POST", _I + "/start", "compute.instances.start", _c("start"), (*_VPZ, "name")),
    ("POST", _I + "/setLabels", "compute.instances.setLabels", _c("set_labels"),
     (*_VPZ, "name", "body")),
    ("GET", _I + "/getGuestAttributes", "compute.instances.getGuestAttributes",
     _c("guest_attributes"), (*_VPZ, "name", "?queryPath")),
    ("GET", _O, "compute.zoneOperations.get", _c("get_operation"), (*_VPZ, "op")),
    ("POST", _O + "/wait", "compute.zoneOperations.wait", _c("wait_operation"), (*_VPZ, "op")),
    ("GET", _Z + "/machineTypes", "compute.machineTypes.list", _c("list_machine_types"),
     (*_VPZ, "query")),
    ("GET", _Z + "/machineTypes/(?P<type>[^/]+)", "compute.machineTypes.get",
     _c("get_machine_type"), (*_VPZ, "type")),
    ("GET", _P + "/global/images/family/(?P<family>[^/]+)", "compute.images.getFromFamily",
     _c("get_image_from_family"), ("version", "project", "family")),
    ("GET", _P + "/global/images/(?P<image>[^/]+)", "compute.images.get", _c("get_image"),
     ("version", "project", "image")),
]  # fmt: skip
