"""Compute Engine's error bodies: `{"error": {"code", "message", "errors": [{"message",
"domain": "global", "reason"}]}}` (no `status`, unlike the TPU API's), with the real
HTTP status. The wordings are the ones public API output shows; each cites where.
"""

from __future__ import annotations

from typing import Any

from tpuctl.emulator.core.errors import ApiError

_STATUS = {
    400: "INVALID_ARGUMENT",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ALREADY_EXISTS",
    412: "FAILED_PRECONDITION",
}


class ComputeError(ApiError):
    """An error answer as Compute Engine renders it: one entry in `errors` with its reason
    (`invalid`, `notFound`, `alreadyExists`, `conditionNotMet`, `badRequest`)."""

    def __init__(self, http: int, reason: str, message: str, **extra: str) -> None:
        super().__init__(http, _STATUS.get(http, "UNKNOWN"), message)
        self.reason = reason
        self.extra = extra  # e.g. location/locationType of a conditionNotMet

    def to_dict(self) -> dict[str, Any]:
        entry = {"message": self.message, "domain": "global", "reason": self.reason, **self.extra}
        return {"error": {"code": self.http, "message": self.message, "errors": [entry]}}


def invalid_value(field: str, value: Any, why: str) -> ComputeError:
    """400 `Invalid value for field 'resource.name': 'a_b'. Must be a match of regex ...`
    (skypilot-org/skypilot#139, golang/go#22905)."""
    return ComputeError(400, "invalid", f"Invalid value for field '{field}': '{value}'. {why}")


def unknown_zone(zone: str) -> ComputeError:
    """`Invalid value for field 'zone': 'us-east1'. Unknown zone.` (inspec/inspec-gcp#301)."""
    return invalid_value("zone", zone, "Unknown zone.")


def not_found(resource: str) -> ComputeError:
    """`The resource 'projects/P/zones/Z/instances/N' was not found` (404, notFound)."""
    return ComputeError(404, "notFound", f"The resource '{resource}' was not found")


def already_exists(resource: str) -> ComputeError:
    """`The resource 'projects/P/global/firewalls/F' already exists` (409, alreadyExists;
    zjuul/snowplow-gcloud-installer#1 shows gcloud printing it)."""
    return ComputeError(409, "alreadyExists", f"The resource '{resource}' already exists")


def fingerprint_mismatch() -> ComputeError:
    """A stale `labelFingerprint` (412 conditionNotMet on the If-Match header: the JSON in
    googleapis/google-cloud-go#7802 and skypilot-org/skypilot#4571)."""
    return ComputeError(
        412,
        "conditionNotMet",
        "Labels fingerprint either invalid or resource labels have changed",
        location="If-Match",
        locationType="header",
    )


def bad_request(message: str) -> ComputeError:
    """400 badRequest, e.g. `Instances with guest accelerators do not support live
    migration.` (openshift/release#63296 for a2-highgpu-1g, whose machine type brings
    its accelerators as a TPU machine type does)."""
    return ComputeError(400, "badRequest", message)


def not_found_kind(resource: str, kind: str) -> ComputeError:
    """`The resource 'hostkeys/' of type 'Guest Attribute' was not found.` (gcloud's
    command_lib/compute/ssh_utils.py matches it as "no host keys published")."""
    return ComputeError(
        404, "notFound", f"The resource '{resource}' of type '{kind}' was not found."
    )


def not_ready(resource: str) -> ComputeError:
    """An instance in the middle of another transition (400 resourceNotReady)."""
    return ComputeError(400, "resourceNotReady", f"The resource '{resource}' is not ready")
