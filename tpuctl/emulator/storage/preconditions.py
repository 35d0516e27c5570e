"""Cloud Storage's request preconditions, as the proxy checks those fake-gcs-server
ignores (https://cloud.google.com/storage/docs/request-preconditions)."""

from __future__ import annotations

# Cloud Storage's answer to a precondition that does not hold (JSON API, 412)
_UNMET = "At least one of the pre-conditions you specified did not hold."
FAILED = {
    "error": {
        "code": 412,
        "message": _UNMET,
        "errors": [
            {
                "message": _UNMET,
                "domain": "global",
                "reason": "conditionNotMet",
                "locationType": "header",
                "location": "If-Match",
            }
        ],
    }
}


def metageneration_holds(query: dict[str, list[str]], metageneration: int) -> bool:
    """Whether a bucket call's ifMetagenerationMatch / NotMatch hold for `metageneration`."""
    match = query.get("ifMetagenerationMatch", [""])[-1]
    differ = query.get("ifMetagenerationNotMatch", [""])[-1]
    if match and match != str(metageneration):
        return False
    return not (differ and differ == str(metageneration))
