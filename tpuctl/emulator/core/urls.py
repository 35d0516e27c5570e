"""URL routing: the Cloud TPU v2 (and Cloud Quotas) REST paths and the control plane's,
each to the backend method (or catalog function) that answers it.

A route names the backend method, not the method itself: the server looks it up on its
own backend, and this module needs no backend to be imported.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from tpuctl.emulator.control.client import CONTROL_PREFIX
from tpuctl.emulator.core import errors
from tpuctl.emulator.iam import accounts as iam
from tpuctl.emulator.iam import oslogin, troubleshooter
from tpuctl.emulator.quotas import preferences as quota_prefs
from tpuctl.emulator.quotas import service_usage
from tpuctl.emulator.tpu import catalog_api

Handler = Callable[..., Any]


@dataclass(frozen=True)
class OnState:
    """A route to an API function over the state, `fn(state, *args)`, which the backend
    runs under its lock (`Backend.apply`): no facade method needed for each."""

    fn: Handler


_P = r"/v2/projects/(?P<project>[^/]+)/locations"
_Z = _P + r"/(?P<zone>[^/:]+)"
_N = _Z + r"/nodes/(?P<node>[^/:]+)"
_O = _Z + r"/operations/(?P<op>[^/:]+)"
_QR = _Z + r"/queuedResources"
# gcloud's `compute tpus locations` and `accelerator-types` groups still call v1 for these
_P1 = r"/v[12]/projects/(?P<project>[^/]+)/locations"
_Z1 = _P1 + r"/(?P<zone>[^/:]+)"
_PZ = ("project", "zone")
# the Cloud Quotas API (cloudquotas.googleapis.com) subset: quota infos of a service
_Q = r"/v1/projects/(?P<project>[^/]+)/locations/global/services/(?P<service>[^/]+)/quotaInfos"

# the Service Usage API (serviceusage.googleapis.com) subset: a project's services
_SU = r"/v1/projects/(?P<project>[^/]+)/services"
# the OS Login API (oslogin.googleapis.com) subset: a user's login profile and keys
_U = r"/v1/users/(?P<user>[^/:]+)"
# Cloud Quotas' quota preferences
_QP = r"/v1/projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/quotaPreferences"

# (HTTP method, path, verb counted in /requests, backend method name or catalog function,
#  arguments: path groups by name, "?param" from the query, "paging", "body")
API_ROUTES: list[tuple[str, str, str, str | Handler | OnState, tuple[str, ...]]] = [
    ("GET", _P1, "locations.list", catalog_api.list_locations, ("project", "paging")),
    ("GET", _Z1, "locations.get", catalog_api.get_location, _PZ),
    ("GET", _Z + "/nodes", "list", "list_nodes", (*_PZ, "paging")),
    ("POST", _Z + "/nodes", "create", "create_node", (*_PZ, "?nodeId", "body")),
    ("GET", _N, "get", "get_node", (*_PZ, "node")),
    ("DELETE", _N, "delete", "delete_node", (*_PZ, "node")),
    ("PATCH", _N, "patch", "update_node", (*_PZ, "node", "?updateMask", "body")),
    ("POST", _N + ":stop", "stop", "stop_node", (*_PZ, "node", "body")),
    ("POST", _N + ":start", "start", "start_node", (*_PZ, "node", "body")),
    ("POST", _N + ":getGuestAttributes", "getGuestAttributes", "get_guest_attributes",
     (*_PZ, "node", "body")),
    ("GET", _QR, "queuedResources.list", "list_queued_resources", (*_PZ, "paging")),
    ("POST", _QR, "queuedResources.create", "create_queued_resource",
     (*_PZ, "?queuedResourceId", "body")),
    ("GET", _QR + "/(?P<qr>[^/:]+)", "queuedResources.get", "get_queued_resource",
     (*_PZ, "qr")),
    ("DELETE", _QR + "/(?P<qr>[^/:]+)", "queuedResources.delete", "delete_queued_resource",
     (*_PZ, "qr", "?force")),
    ("GET", _Z + "/operations", "operations.list", "list_operations", (*_PZ, "paging")),
    ("GET", _O, "operations.get", "get_operation", (*_PZ, "op")),
    ("DELETE", _O, "operations.delete", "delete_operation", (*_PZ, "op")),
    ("POST", _O + ":cancel", "operations.cancel", "cancel_operation", (*_PZ, "op")),
    ("GET", _Z1 + "/acceleratorTypes", "acceleratorTypes.list",
     catalog_api.list_accelerator_types, (*_PZ, "paging")),
    ("GET", _Z1 + "/acceleratorTypes/(?P<type>[^/:]+)", "acceleratorTypes.get",
     catalog_api.get_accelerator_type, (*_PZ, "type")),
    ("GET", _Z + "/runtimeVersions", "runtimeVersions.list",
     catalog_api.list_runtime_versions, (*_PZ, "paging")),
    ("GET", _Z + "/runtimeVersions/(?P<version>[^/:]+)", "runtimeVersions.get",
     catalog_api.get_runtime_version, (*_PZ, "version")),
    ("GET", _Q, "quotaInfos.list", "list_quota_infos", ("project", "service", "paging")),
    ("GET", _Q + "/(?P<quota>[^/]+)", "quotaInfos.get", "get_quota_info",
     ("project", "service", "quota")),
    ("GET", _SU, "services.list", OnState(service_usage.list_services),
     ("project", "?filter", "paging")),
    ("GET", _SU + "/(?P<service>[^/:]+)", "services.get", OnState(service_usage.get_service),
     ("project", "service")),
    ("POST", _SU + "/(?P<service>[^/:]+):enable", "services.enable",
     OnState(service_usage.enable_service), ("project", "service")),
    ("POST", _SU + ":batchEnable", "services.batchEnable",
     OnState(service_usage.batch_enable), ("project", "body")),
    ("GET", r"/v1/(?P<op>operations/[^/]+)", "serviceusage.operations.get",
     OnState(service_usage.get_operation), ("op",)),
    ("POST", _QP, "quotaPreferences.create", OnState(quota_prefs.create),
     ("project", "location", "?quotaPreferenceId", "body")),
    ("GET", _QP, "quotaPreferences.list", OnState(quota_prefs.list_page),
     ("project", "location", "paging")),
    ("GET", _QP + "/(?P<pref>[^/]+)", "quotaPreferences.get", OnState(quota_prefs.get),
     ("project", "location", "pref")),
    ("GET", _U + "/loginProfile", "users.getLoginProfile", OnState(oslogin.get_login_profile),
     ("user", "?projectId", "?systemId")),
    ("POST", _U + ":importSshPublicKey", "users.importSshPublicKey",
     OnState(oslogin.import_ssh_public_key), ("user", "?projectId", "body")),
    ("DELETE", _U + "/sshPublicKeys/(?P<fp>[^/:]+)", "users.sshPublicKeys.delete",
     OnState(oslogin.delete_ssh_public_key), ("user", "fp")),
    # Compute Engine (compute.googleapis.com): a project's metadata
    ("GET", r"/compute/v1/projects/(?P<project>[^/]+)", "compute.projects.get",
     OnState(oslogin.get_project), ("project",)),
    # Cloud Resource Manager: what the caller (or a VM's account) may do in a project
    ("POST", r"/v1/projects/(?P<project>[^/:]+):testIamPermissions",
     "projects.testIamPermissions", OnState(iam.test_iam_permissions),
     ("project", "body", "principal")),
    ("GET", r"/v1/projects/(?P<project>[^/:]+)", "projects.get", OnState(iam.get_project),
     ("project",)),
    # IAM: whether a service account exists
    ("GET", r"/v1/projects/(?P<project>[^/]+)/serviceAccounts/(?P<email>[^/:]+)",
     "serviceAccounts.get", OnState(iam.get_service_account), ("project", "email")),
    # Policy Troubleshooter: what another principal holds (v2alpha1: gcloud's)
    ("POST", r"/v1/iam:troubleshoot", "iam.troubleshoot", OnState(troubleshooter.troubleshoot),
     ("body", "principal")),
    ("POST", r"/v2alpha1/iam:troubleshoot", "iam.troubleshoot",
     OnState(troubleshooter.troubleshoot), ("body", "principal")),
    # Cloud Monitoring (monitoring.googleapis.com): time series of the TPU workers
    ("GET", r"/v3/projects/(?P<project>[^/]+)/timeSeries", "timeSeries.list",
     "list_time_series", ("project", "query")),
]  # fmt: skip

# control plane: (HTTP method, path under CONTROL_PREFIX) -> backend method, body keys
CONTROL_ROUTES: dict[tuple[str, str], tuple[str, tuple[str, ...]]] = {
    ("GET", "status"): ("status", ()),
    ("GET", "config"): ("config", ()),
    ("POST", "config"): ("update_config", ("body",)),
    ("POST", "reset"): ("reset", ()),
    ("GET", "faults"): ("faults_config", ()),
    ("POST", "faults"): ("set_faults", ("body",)),
    ("POST", "advance"): ("advance", ("node?",)),
    ("GET", "nodes"): ("all_nodes", ()),
    ("GET", "requests"): ("request_counts", ()),
    ("GET", "requests/bodies"): ("request_bodies", ("method?",)),
    ("POST", "guest-attributes"): ("set_guest_attributes", ("node", "worker", "items")),
    ("POST", "preempt"): ("preempt", ("node", "notice?")),
    ("GET", "queued"): ("all_queued", ()),
    ("POST", "queued/fail"): ("queued_control", ("=fail", "name", "message?")),
    ("POST", "queued/suspend"): ("queued_control", ("=suspend", "name")),
    ("POST", "queued/suspending"): ("queued_control", ("=suspending", "name")),
    ("POST", "node-state"): ("set_node_state", ("body",)),
    ("POST", "worker-fault"): ("worker_fault", ("body",)),
    ("POST", "queued/provision"): ("queued_control", ("=provision", "name")),
    ("POST", "quota-preferences/decide"): ("decide_quota_preference", ("name", "granted")),
    ("GET", "monitoring"): ("monitoring_config", ()),
    ("POST", "monitoring"): ("configure_monitoring", ("body",)),
    ("POST", "monitoring/sample"): ("sample_metrics", ()),
    ("POST", "storage/lifecycle"): ("run_lifecycle", ("days?",)),
}


def arguments(
    spec: tuple[str, ...],
    match: dict[str, str],
    query: dict[str, str],
    body: dict[str, Any],
    principal: Any = None,
) -> list[Any]:
    args: list[Any] = []
    for item in spec:
        if item == "principal":  # who calls: a VM's service account (iam/accounts.py), or None
            args.append(principal)
        elif item == "body":
            args.append(body)
        elif item == "query":  # every query parameter, as sent
            args.append(dict(query))
        elif item == "paging":
            try:
                args.append(int(query.get("pageSize") or 0))
            except ValueError:
                raise errors.invalid_argument("pageSize must be a number.", "page_size") from None
            args.append(query.get("pageToken", ""))
        elif item.startswith("?"):
            args.append(query.get(item[1:], ""))
        else:
            args.append(match[item])
    return args


def control_arguments(spec: tuple[str, ...], body: dict[str, Any]) -> list[Any]:
    args: list[Any] = []
    for item in spec:
        if item == "body":
            args.append(body)
        elif item.startswith("="):  # a constant
            args.append(item[1:])
        elif item.endswith("?"):
            args.append(body.get(item[:-1]))
        elif item not in body:
            raise errors.invalid_argument(f"the control call needs '{item}'")
        else:
            args.append(body[item])
    return args


_COMPILED = [(m, re.compile(path + "$"), verb, fn, spec) for m, path, verb, fn, spec in API_ROUTES]


def route(
    method: str, path: str
) -> tuple[str, str | Handler | OnState, tuple[str, ...], dict[str, str]]:
    for route_method, pattern, verb, fn, spec in _COMPILED:
        match = pattern.match(path)
        if match and route_method == method:
            return verb, fn, spec, {k: unquote(v) for k, v in match.groupdict().items()}
    raise errors.no_route(method, path)


def control_route(method: str, path: str) -> tuple[str, tuple[str, ...]]:
    """The backend method and the body keys of a control call (`path` with its prefix)."""
    key = (method, path[len(CONTROL_PREFIX) :])
    if key not in CONTROL_ROUTES:
        raise errors.no_route(method, path)
    return CONTROL_ROUTES[key]
