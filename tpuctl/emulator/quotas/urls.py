"""The Cloud Quotas (cloudquotas.googleapis.com) and Service Usage
(serviceusage.googleapis.com) REST paths tpuctl calls."""

from __future__ import annotations

from tpuctl.emulator.core.routes import OnState, Route
from tpuctl.emulator.quotas import preferences as quota_prefs
from tpuctl.emulator.quotas import service_usage

# the Cloud Quotas API subset: quota infos of a service
_Q = r"/v1/projects/(?P<project>[^/]+)/locations/global/services/(?P<service>[^/]+)/quotaInfos"
# the Service Usage API subset: a project's services
_SU = r"/v1/projects/(?P<project>[^/]+)/services"
# Cloud Quotas' quota preferences
_QP = r"/v1/projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/quotaPreferences"

ROUTES: list[Route] = [
    ("GET", _Q, "quotaInfos.list", "list_quota_infos", ("project", "service", "paging")),
    (
        "GET",
        _Q + "/(?P<quota>[^/]+)",
        "quotaInfos.get",
        "get_quota_info",
        ("project", "service", "quota"),
    ),
    (
        "GET",
        _SU,
        "services.list",
        OnState(service_usage.list_services),
        ("project", "?filter", "paging"),
    ),
    (
        "GET",
        _SU + "/(?P<service>[^/:]+)",
        "services.get",
        OnState(service_usage.get_service),
        ("project", "service"),
    ),
    (
        "POST",
        _SU + "/(?P<service>[^/:]+):enable",
        "services.enable",
        OnState(service_usage.enable_service),
        ("project", "service"),
    ),
    (
        "POST",
        _SU + ":batchEnable",
        "services.batchEnable",
        OnState(service_usage.batch_enable),
        ("project", "body"),
    ),
    (
        "GET",
        r"/v1/(?P<op>operations/[^/]+)",
        "serviceusage.operations.get",
        OnState(service_usage.get_operation),
        ("op",),
    ),
    (
        "POST",
        _QP,
        "quotaPreferences.create",
        OnState(quota_prefs.create),
        ("project", "location", "?quotaPreferenceId", "body"),
    ),
    (
        "GET",
        _QP,
        "quotaPreferences.list",
        OnState(quota_prefs.list_page),
        ("project", "location", "paging"),
    ),
    (
        "GET",
        _QP + "/(?P<pref>[^/]+)",
        "quotaPreferences.get",
        OnState(quota_prefs.get),
        ("project", "location", "pref"),
    ),
]
