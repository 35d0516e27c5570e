"""The Cloud Billing Catalog API's REST routes (cloudbilling.googleapis.com v1): no
project in the path, so the usual gate passes them; `catalog.admit` is theirs."""

from __future__ import annotations

from tpuctl.emulator.billing import catalog
from tpuctl.emulator.core.routes import OnState, Route

ROUTES: list[Route] = [
    (
        "GET",
        r"/v1/services",
        "cloudbilling.services.list",
        OnState(catalog.list_services),
        ("paging", "principal", "user_project", "api_key"),
    ),
    (
        "GET",
        r"/v1/services/(?P<service>[^/]+)/skus",
        "cloudbilling.services.skus.list",
        OnState(catalog.list_skus),
        ("service", "paging", "query", "principal", "user_project", "api_key"),
    ),
]
