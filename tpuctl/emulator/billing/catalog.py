"""The Cloud Billing Catalog API's state and methods: the SKU table (`skus.py`'s, with
the control plane's changes), `services.list`, `services.skus.list`, and the checks
Google's front end makes before them.

Config (control plane, `POST /_emulator/v1/config`): `billing_catalog`, "ok" (the
default), "unavailable" (503 UNAVAILABLE) or "forbidden" (403 PERMISSION_DENIED, as the
front end answers a caller with no access), so a client's fallback can be shown.

The checks, in the order the front end makes them: an API key (`?key=` or the
`x-goog-api-key` header) is refused, as the emulator knows none (400 API_KEY_INVALID);
a VM's token whose scopes cover none of cloud-billing.readonly, cloud-billing,
cloud-platform and cloud-platform.read-only gets 403 ACCESS_TOKEN_SCOPE_INSUFFICIENT;
a quota project (`x-goog-user-project`) where the Cloud Billing API is off gets 403
SERVICE_DISABLED. No IAM permission is needed: the catalog's prices are public.
"""

from __future__ import annotations

import base64
import copy
from typing import Any

from tpuctl.emulator.billing import skus as table
from tpuctl.emulator.core import errors
from tpuctl.emulator.iam.accounts import Principal, scope_insufficient
from tpuctl.emulator.offerings import apis

CONFIG_KEYS = {"billing_catalog"}
MODES = ("ok", "unavailable", "forbidden")
MAX_PAGE = 5000  # the API's default and largest page
_AUTH = "https://www.googleapis.com/auth/"
SCOPES = {
    _AUTH + s
    for s in (
        "cloud-billing.readonly",
        "cloud-billing",
        "cloud-platform",
        "cloud-platform.read-only",
    )
}
_RPC = "google.cloud.billing.v1.CloudCatalog."


class BillingCatalog:
    """The SKUs served (the table's, then the control plane's changes) and the switch."""

    def __init__(self) -> None:
        self.mode = "ok"
        # the control plane's changes to the table: skuId -> SKU, or None (removed)
        self.changes: dict[str, dict[str, Any] | None] = {}
        self._defaults = table.default_skus()

    # -- config and state ------------------------------------------------------------
    def to_config(self) -> dict[str, Any]:
        return {"billing_catalog": self.mode}

    @staticmethod
    def validate(body: dict[str, Any]) -> None:
        if body.get("billing_catalog", "ok") not in MODES:
            raise errors.invalid_argument(f"billing_catalog must be one of {list(MODES)}")

    def update(self, body: dict[str, Any]) -> None:
        """Apply the config key (checked first by `validate`)."""
        self.mode = body.get("billing_catalog", self.mode)

    def load(self, config: dict[str, Any], changes: dict[str, Any]) -> None:
        self.mode = config.get("billing_catalog", self.mode)
        self.changes = copy.deepcopy(changes)

    def to_state(self) -> dict[str, Any]:
        return copy.deepcopy(self.changes)

    # -- the table -----------------------------------------------------------------------
    def skus(self) -> dict[str, dict[str, Any]]:
        """Every SKU served, by skuId."""
        served = dict(self._defaults)
        for sku_id, sku in self.changes.items():
            if sku is None:
                served.pop(sku_id, None)
            else:
                served[sku_id] = sku
        return served

    def put(self, sku: dict[str, Any]) -> None:
        self.changes[sku["skuId"]] = copy.deepcopy(sku)

    def remove(self, sku_id: str) -> None:
        if sku_id not in self.skus():
            raise errors.not_found(f"skus/{sku_id}")
        self.changes[sku_id] = None


# -- the front end's checks -----------------------------------------------------------------
def api_key_invalid() -> errors.ApiError:
    message = "API key not valid. Please pass a valid API key."
    info = {
        "@type": errors.ERROR_INFO_TYPE,
        "reason": "API_KEY_INVALID",
        "domain": "googleapis.com",
        "metadata": {"service": apis.BILLING},
    }
    localized = {
        "@type": "type.googleapis.com/google.rpc.LocalizedMessage",
        "locale": "en-US",
        "message": message,
    }
    return errors.ApiError(400, "INVALID_ARGUMENT", message, [info, localized])


def admit(
    state: Any, api_key: str, principal: Principal | None, user_project: str, rpc: str
) -> None:
    """Refuse a call as Google's front end would, then as the catalog's switch says."""
    if api_key:
        raise api_key_invalid()
    if principal is not None and not SCOPES & set(principal.scopes):
        raise scope_insufficient(apis.BILLING, _RPC + rpc)
    access = state.access
    if user_project and not access.enabled(user_project, apis.BILLING):
        raise errors.service_disabled(user_project, apis.BILLING, apis.TITLES[apis.BILLING])
    mode = state.billing.mode
    if mode == "unavailable":
        raise errors.ApiError(503, "UNAVAILABLE", "The service is currently unavailable.")
    if mode == "forbidden":
        raise errors.ApiError(403, "PERMISSION_DENIED", "The caller does not have permission")


# -- paging ---------------------------------------------------------------------------------
def _page(items: list[Any], page_size: int, token: str, what: str) -> tuple[list[Any], str]:
    if page_size < 0:
        raise errors.invalid_argument("page_size must be non-negative.", "page_size")
    size = min(page_size or MAX_PAGE, MAX_PAGE)
    start = 0
    if token:
        try:
            kind, _, offset = base64.urlsafe_b64decode(token.encode()).decode().partition(":")
            start = int(offset)
        except (ValueError, UnicodeDecodeError):
            kind = ""
        if kind != what or not 0 <= start <= len(items):
            raise errors.invalid_argument("Invalid page token.", "page_token")
    end = start + size
    following = ""
    if end < len(items):
        following = base64.urlsafe_b64encode(f"{what}:{end}".encode()).decode()
    return items[start:end], following


def _answer(key: str, items: list[Any], following: str) -> dict[str, Any]:
    answer: dict[str, Any] = {key: items}
    if following:
        answer["nextPageToken"] = following
    return answer


# -- the API methods (routes in urls.py) ----------------------------------------------------
def list_services(
    state: Any,
    page_size: int,
    page_token: str,
    principal: Principal | None,
    user_project: str,
    api_key: str,
) -> dict[str, Any]:
    """`services.list`: the public services whose SKUs the catalog has."""
    admit(state, api_key, principal, user_project, "ListServices")
    services = [
        {
            "name": f"services/{sid}",
            "serviceId": sid,
            "displayName": title,
            "businessEntityName": "businessEntities/GCP",
        }
        for sid, title in sorted(table.SERVICES.items(), key=lambda s: s[1])
    ]
    page, following = _page(services, page_size, page_token, "services")
    return _answer("services", page, following)


def list_skus(
    state: Any,
    service_id: str,
    page_size: int,
    page_token: str,
    query: dict[str, str],
    principal: Principal | None,
    user_project: str,
    api_key: str,
) -> dict[str, Any]:
    """`services.skus.list`: a service's SKUs with their prices in USD (the only currency
    the emulator knows); startTime and endTime are accepted and change nothing."""
    admit(state, api_key, principal, user_project, "ListSkus")
    if service_id not in table.SERVICES:
        raise errors.not_found(f"services/{service_id}")
    currency = query.get("currencyCode") or "USD"
    if currency != "USD":
        raise errors.invalid_argument(
            f"Currency code {currency} is not supported here: the emulator prices in USD.",
            "currency_code",
        )
    prefix = f"services/{service_id}/"
    served = [s for s in state.billing.skus().values() if s["name"].startswith(prefix)]
    served.sort(key=lambda s: s["skuId"])
    page, following = _page(served, page_size, page_token, f"skus/{service_id}")
    return _answer("skus", copy.deepcopy(page), following)
