"""Cloud Storage's bucket lifecycle configuration, which fake-gcs-server does not keep.

fake-gcs-server (1.54) accepts `lifecycle` in a bucket's insert or patch and silently
drops it, so a client setting a rule would read back none. The storage proxy
(proxy.py) keeps each bucket's configuration here instead: it checks it as
Cloud Storage does, strips it from what it passes on, and adds it back to every bucket
resource it returns.

The configuration's shape is the JSON API's `Bucket.lifecycle`
(https://cloud.google.com/storage/docs/json_api/v1/buckets#resource): up to 100 rules,
each an `action` (`Delete`, `SetStorageClass` with a `storageClass`,
`AbortIncompleteMultipartUpload`) and a non-empty `condition`. Cloud Storage refuses a
bad one with 400 "Invalid argument." and reason `invalid`, naming no field (seen by
google-cloud-python#5877 and terraform-google-cloud-storage#118 and #263); so does this.

Cloud Storage applies the rules asynchronously, usually within a day of an object
qualifying (https://cloud.google.com/storage/docs/lifecycle#behavior). The emulator
applies them only when told, from the control plane (`POST /_emulator/v1/storage/
lifecycle {"days": N}`: as if N more days had passed), so a test decides when. It
applies `Delete` with the conditions `age`, `createdBefore`, `matchesPrefix` and
`matchesSuffix`; a rule with any other condition (versions, storage classes, custom
time) is kept and returned but never fires here.
"""

from __future__ import annotations

import datetime
from typing import Any

from tpuctl.emulator.core.timestamps import parse_rfc3339

MAX_RULES = 100  # https://cloud.google.com/storage/quotas#buckets
ACTIONS = {"Delete", "SetStorageClass", "AbortIncompleteMultipartUpload"}
# condition -> the JSON type Cloud Storage takes for it
CONDITIONS: dict[str, type | tuple[type, ...]] = {
    "age": int,
    "createdBefore": str,  # a date, YYYY-MM-DD
    "customTimeBefore": str,
    "daysSinceCustomTime": int,
    "daysSinceNoncurrentTime": int,
    "noncurrentTimeBefore": str,
    "isLive": bool,
    "numNewerVersions": int,
    "matchesStorageClass": list,
    "matchesPrefix": list,
    "matchesSuffix": list,
}
APPLIED = {"age", "createdBefore", "matchesPrefix", "matchesSuffix"}
_DATES = {"createdBefore", "customTimeBefore", "noncurrentTimeBefore"}


class Invalid(ValueError):
    """A lifecycle configuration Cloud Storage refuses."""


def invalid_body() -> dict[str, Any]:
    """The error body Cloud Storage answers a bad lifecycle configuration with."""
    message = "Invalid argument."
    return {
        "error": {
            "code": 400,
            "message": message,
            "errors": [{"message": message, "domain": "global", "reason": "invalid"}],
        }
    }


def _number(value: Any) -> int:
    """Integers come as JSON numbers or as strings (int64 in the JSON API)."""
    if isinstance(value, bool):
        raise Invalid("a number")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise Invalid("a number") from None
    if number < 0:
        raise Invalid("not negative")
    return number


def _condition(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict) or not raw:
        raise Invalid("a rule needs a condition")
    out: dict[str, Any] = {}
    for key, value in raw.items():
        kind = CONDITIONS.get(key)
        if kind is None:
            raise Invalid(f"unknown condition {key}")
        if kind is int:
            out[key] = _number(value)
        elif kind is bool:
            if not isinstance(value, bool):
                raise Invalid(f"{key} is true or false")
            out[key] = value
        elif kind is list:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise Invalid(f"{key} is a list of strings")
            out[key] = list(value)
        else:
            try:
                datetime.date.fromisoformat(str(value))
            except ValueError:
                raise Invalid(f"{key} is a date") from None
            out[key] = str(value)
    return out


def _action(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict) or raw.get("type") not in ACTIONS:
        raise Invalid("an action's type")
    if raw["type"] == "SetStorageClass" and not raw.get("storageClass"):
        raise Invalid("SetStorageClass needs a storageClass")
    return {k: raw[k] for k in ("type", "storageClass") if raw.get(k)}


def validate(lifecycle: Any) -> dict[str, Any] | None:
    """The configuration as stored (None: no rules), or Invalid."""
    if lifecycle is None:
        return None
    if not isinstance(lifecycle, dict):
        raise Invalid("lifecycle is an object")
    rules = lifecycle.get("rule") or []
    if not isinstance(rules, list) or len(rules) > MAX_RULES:
        raise Invalid(f"at most {MAX_RULES} rules")
    out = []
    for rule in rules:
        if not isinstance(rule, dict):
            raise Invalid("a rule is an object")
        out.append(
            {"action": _action(rule.get("action")), "condition": _condition(rule.get("condition"))}
        )
    return {"rule": out} if out else None


def _created(obj: dict[str, Any]) -> datetime.datetime:
    return parse_rfc3339(str(obj.get("timeCreated", "")))  # any fraction, on Python 3.10


def _matches(condition: dict[str, Any], obj: dict[str, Any], now: datetime.datetime) -> bool:
    if set(condition) - APPLIED:
        return False  # a condition the emulator does not model: never fires here
    name = str(obj.get("name", ""))
    created = _created(obj)
    if "age" in condition and (now - created).total_seconds() < condition["age"] * 86400:
        return False
    if "createdBefore" in condition:
        before = datetime.date.fromisoformat(condition["createdBefore"])
        if created.date() >= before:
            return False
    prefixes = condition.get("matchesPrefix")
    if prefixes is not None and not any(name.startswith(p) for p in prefixes):
        return False
    suffixes = condition.get("matchesSuffix")
    return suffixes is None or any(name.endswith(s) for s in suffixes)


def due_for_deletion(
    lifecycle: dict[str, Any] | None, objects: list[dict[str, Any]], now: datetime.datetime
) -> list[str]:
    """The names of `objects` (JSON API resources) a Delete rule of `lifecycle` removes
    at `now`."""
    rules = [r for r in (lifecycle or {}).get("rule", []) if r["action"]["type"] == "Delete"]
    return [
        str(obj["name"])
        for obj in objects
        if any(_matches(rule["condition"], obj, now) for rule in rules)
    ]
