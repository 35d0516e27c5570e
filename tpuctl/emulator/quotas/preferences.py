"""Cloud Quotas' quota preferences (google.api.cloudquotas.v1.QuotaPreference): what a
project asked a quota to be, create, get and list, as `tpuctl quota request` files them.

A new preference is under review (`reconciling: true`, `grantedValue` the limit now);
the control plane decides it (`POST /_emulator/v1/quota-preferences/decide {"name",
"granted"}`), which sets the limit the TPU API enforces (`quotas.QuotaConfig`) and ends
the review, as an approval in the cloud does after hours. Like `tpu.api`'s, these
functions run with the facade's lock held.
"""

from __future__ import annotations

import re
import secrets
from typing import Any

from tpuctl.emulator.core import errors
from tpuctl.emulator.core.state import State
from tpuctl.emulator.core.timestamps import proto_timestamp
from tpuctl.emulator.offerings import quotas
from tpuctl.emulator.tpu.rules import listing

_ID = re.compile(r"[a-z0-9_-]{1,63}")


_stamp = proto_timestamp  # createTime, updateTime: Timestamps, 9 fractional digits


def _parent(project: str, location: str) -> str:
    if location != "global":
        raise errors.invalid_argument(f"Location '{location}' is not supported; use 'global'.")
    return f"projects/{project}/locations/global"


def _int(value: Any, field: str) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise errors.invalid_argument(f"{field} must be an integer.", field) from None
    if number < 0:
        raise errors.invalid_argument(f"{field} must be >= 0.", field)
    return number


def create(
    state: State, project: str, location: str, pref_id: str, body: dict[str, Any]
) -> dict[str, Any]:
    parent = _parent(project, location)
    service, quota_id = body.get("service", ""), body.get("quotaId", "")
    config = body.get("quotaConfig") or {}
    if not service or not quota_id or "preferredValue" not in config:
        raise errors.invalid_argument(
            "service, quota_id and quota_config.preferred_value are required.", "quota_preference"
        )
    preferred = _int(config["preferredValue"], "quota_config.preferred_value")
    spec = quotas.QUOTAS_BY_ID.get(quota_id)
    if service != quotas.SERVICE or spec is None:
        raise errors.not_found(f"{parent}/services/{service}/quotaInfos/{quota_id}")
    dimensions = body.get("dimensions") or {}
    if set(dimensions) - {spec.dimension}:
        raise errors.invalid_argument(
            f"Quota {quota_id} has the dimension '{spec.dimension}' only; got "
            f"{sorted(dimensions)}.",
            "quota_preference.dimensions",
        )
    where = dimensions.get(spec.dimension, "*")
    granted = state.quota.limit(quota_id, where)
    if preferred > granted and not body.get("contactEmail"):
        raise errors.invalid_argument(
            "Contact email is required for a quota increase request.",
            "quota_preference.contact_email",
        )
    if pref_id and not _ID.fullmatch(pref_id):
        raise errors.invalid_argument(
            "quota_preference_id must be 1-63 lowercase letters, digits, '_' or '-'.",
            "quota_preference_id",
        )
    name = f"{parent}/quotaPreferences/{pref_id or 'tpuctl-' + secrets.token_hex(6)}"
    if name in state.quota_prefs:
        raise errors.already_exists(name)
    now = _stamp(state.now())
    pref = {
        "name": name,
        "dimensions": dict(dimensions),
        "quotaConfig": {
            "preferredValue": str(preferred),
            "grantedValue": str(granted),
            "traceId": secrets.token_hex(8),
            "requestOrigin": "ORIGIN_UNSPECIFIED",
            "stateDetail": "The request is under review.",
        },
        "etag": secrets.token_hex(8),
        "createTime": now,
        "updateTime": now,
        "service": service,
        "quotaId": quota_id,
        "reconciling": preferred > granted,
        "justification": str(body.get("justification") or ""),
        "contactEmail": str(body.get("contactEmail") or ""),
    }
    if preferred <= granted:  # a decrease, or what is granted already: applied at once
        state.quota.limits[quota_id][where] = preferred
        pref["quotaConfig"]["grantedValue"] = str(preferred)
        pref["quotaConfig"]["stateDetail"] = ""
    state.quota_prefs[name] = pref
    state.changed()
    return dict(pref)


def get(state: State, project: str, location: str, pref_id: str) -> dict[str, Any]:
    name = f"{_parent(project, location)}/quotaPreferences/{pref_id}"
    if name not in state.quota_prefs:
        raise errors.not_found(name)
    return dict(state.quota_prefs[name])


def list_page(
    state: State, project: str, location: str, page_size: int = 0, page_token: str = ""
) -> dict[str, Any]:
    parent = _parent(project, location) + "/"
    prefs = [p for name, p in sorted(state.quota_prefs.items()) if name.startswith(parent)]
    return listing("quotaPreferences", prefs, page_size, page_token)


def decide(state: State, name: str, granted: Any) -> dict[str, Any]:
    """End the review of a preference: `granted` becomes the quota's limit there."""
    pref = state.quota_prefs.get(name)
    if pref is None:
        raise errors.not_found(name)
    value = _int(granted, "granted")
    spec = quotas.QUOTAS_BY_ID[pref["quotaId"]]
    where = pref["dimensions"].get(spec.dimension, "*")
    state.quota.limits[spec.quota_id][where] = value
    pref["quotaConfig"]["grantedValue"] = str(value)
    pref["quotaConfig"]["stateDetail"] = ""
    pref["reconciling"] = False
    pref["updateTime"] = _stamp(state.now())
    state.changed()
    return dict(pref)
