"""What Compute Engine refuses in an `instances.insert` body, and the list filters it
takes: pure functions. Each wording cites where it was seen (compute/errors.py)."""

from __future__ import annotations

import re
import uuid
from typing import Any

from tpuctl.emulator.compute import catalog, errors
from tpuctl.emulator.compute.catalog import MachineType

NAME = re.compile(r"[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?")
NAME_WHY = "Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'"
LABEL_KEY = re.compile(r"[a-z][a-z0-9_-]{0,62}")
LABEL_VALUE = re.compile(r"[a-z0-9_-]{0,63}")
PROVISIONING = ("STANDARD", "SPOT", "FLEX_START", "RESERVATION_BOUND")
TERMINATION_ACTIONS = ("STOP", "DELETE")
MAINTENANCE = ("MIGRATE", "TERMINATE")


ZONE_SHAPE = re.compile(r"[a-z]+-[a-z]+[0-9]+-[a-z]")


def check_zone(zone: str, project: str) -> None:
    """A zone the emulator serves. A name shaped like a zone that it does not serve is a
    zone that does not exist, 404 (`The resource 'projects/P/zones/us-east1-a' was not
    found`, GoogleCloudPlatform/gke-terraform-generator#24); anything else, such as a
    region, is `Unknown zone` (400, inspec/inspec-gcp#301)."""
    if zone in catalog.zones():
        return
    if ZONE_SHAPE.fullmatch(zone):
        raise errors.not_found(f"projects/{project}/zones/{zone}")
    raise errors.unknown_zone(zone)


def check_request_id(value: str) -> None:
    """ "The request ID must be a valid UUID with the exception that zero UUID is not
    supported (00000000-0000-0000-0000-000000000000)" (the `requestId` parameter of every
    mutating method, e.g. instances.insert's reference); the refusal's wording is the
    emulator's own (contributing/emulator-fidelity.md)."""
    try:
        valid = uuid.UUID(value).int != 0
    except ValueError:
        valid = False
    if not valid:
        why = "The request ID must be a valid UUID other than the zero UUID."
        raise errors.invalid_value("requestId", value, why)


def check_name(name: Any, field: str = "resource.name") -> str:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise errors.invalid_value(field, name, NAME_WHY)
    return name


def machine_type(zone: str, value: Any) -> MachineType:
    """The machine type a body's `machineType` names: a full or partial URL
    (`zones/Z/machineTypes/X`, `projects/P/zones/Z/machineTypes/X`, `https://.../X`)."""
    text = str(value or "")
    match = re.search(r"(?:^|/)zones/([^/]+)/machineTypes/([^/]+)$", text)
    name = match.group(2) if match else text.rsplit("/", 1)[-1]
    found = catalog.machine_type(zone, name) if match and match.group(1) == zone else None
    if found is None:
        # gcloud matches this sentence and adds a `machine-types list --zones` hint
        # (lib/surface/compute/instances/create.py)
        raise errors.invalid_value(
            "resource.machineType",
            text,
            f"Machine type with name '{name}' does not exist in zone '{zone}'.",
        )
    if not found.instances_allowed:
        # a migration guide's quote of the refusal
        # (contributing/emulator-fidelity.md; reason guessed)
        raise errors.bad_request(f"This user agent is not allowed to use the machine type [{name}]")
    return found


def check_scheduling(scheduling: Any, accelerators: bool = True) -> dict[str, Any]:
    """The scheduling a VM must have: with `accelerators` (a TPU machine type),
    TERMINATE on host maintenance (such instances cannot live-migrate); no automatic
    restart for Spot."""
    if not isinstance(scheduling, dict):
        scheduling = {}
    model = scheduling.get("provisioningModel", "STANDARD")
    if model not in PROVISIONING:
        raise errors.invalid_value("resource.scheduling.provisioningModel", model, "")
    spot = model == "SPOT" or scheduling.get("preemptible") is True
    # MIGRATE is the API's default, but "For preemptible instances, the default and only
    # possible behavior is TERMINATE" (Scheduling.onHostMaintenance, the v1 reference,
    # https://cloud.google.com/compute/docs/reference/rest/v1/instances), Spot's too
    host = scheduling.get("onHostMaintenance", "TERMINATE" if spot else "MIGRATE")
    if host not in MAINTENANCE:
        raise errors.invalid_value("resource.scheduling.onHostMaintenance", host, "")
    if host != "TERMINATE" and accelerators:
        # Refused even when the request leaves onHostMaintenance out: Compute Engine does
        # not turn the default into TERMINATE for a machine type that brings its own
        # accelerators. gcloud sends no onHostMaintenance without --maintenance-policy
        # (googlecloudsdk instance_utils.CreateOnHostMaintenanceMessage: None), and
        # `gcloud compute instances create --machine-type=g2-standard-4` without it got this
        # very 400 (loft-sh/devpod issue 973, 2024), as did g2-standard-16
        # (cloudpilot-ai/karpenter-provider-gcp issue 167, 2025) and a2-highgpu-1g
        # (openshift/release pull 63296, 2025); "VMs that have GPUs attached" can only stop
        # at host maintenance ("Set VM host maintenance policy", Limitations). No public
        # source shows a TPU machine type inserted without it; Compute Engine's TPU page
        # (docs.cloud.google.com/compute/docs/tpus/tpu-machines) creates them with TERMINATE.
        raise errors.bad_request("Instances with guest accelerators do not support live migration.")
    restart = scheduling.get("automaticRestart")
    if spot and restart is True:
        # as Compute words it for preemptible (elasticluster/elasticluster#568)
        field = "preemptible" if scheduling.get("preemptible") else "provisioningModel"
        value = "true" if field == "preemptible" else model
        raise errors.invalid_value(
            f"resource.scheduling.{field}",
            value,
            "Scheduling must have preemptible be false when AutomaticRestart is true.",
        )
    limit = scheduling.get("maxRunDuration")
    if limit is not None:
        # 30 s to 120 days (the instance limits page: limit-vm-runtime)
        seconds = str(limit.get("seconds") or "") if isinstance(limit, dict) else ""
        if not seconds.isdigit() or not 30 <= int(seconds) <= 120 * 86400:
            raise errors.invalid_value(
                "resource.scheduling.maxRunDuration.seconds",
                seconds,
                "Must be between 30 seconds and 120 days.",
            )
        if model == "FLEX_START" and int(seconds) > 7 * 86400:
            # flex-start VMs run for up to seven days (About Flex-start VMs; wording the
            # emulator's own)
            raise errors.invalid_value(
                "resource.scheduling.maxRunDuration.seconds",
                seconds,
                "Must be at most 7 days for FLEX_START.",
            )
    action = scheduling.get("instanceTerminationAction")
    if action is not None and action not in TERMINATION_ACTIONS:
        raise errors.invalid_value("resource.scheduling.instanceTerminationAction", action, "")
    out = dict(scheduling)
    out.setdefault("onHostMaintenance", host)
    out.setdefault("provisioningModel", model)
    out.setdefault("automaticRestart", not spot)
    out.setdefault("preemptible", False)
    if spot:
        out.setdefault("instanceTerminationAction", "STOP")  # the default, for Spot only
    return out


def check_labels(labels: Any, field: str = "resource.labels") -> dict[str, str]:
    if labels is None:
        return {}
    if not isinstance(labels, dict):
        raise errors.invalid_value(field, labels, "Labels must be a map.")
    for key, value in labels.items():
        if not LABEL_KEY.fullmatch(str(key)) or not LABEL_VALUE.fullmatch(str(value)):
            why = "Label keys and values must match the label format."
            raise errors.invalid_value(field, f"{key}={value}", why)
    return {str(k): str(v) for k, v in labels.items()}


def check_metadata(metadata: Any) -> dict[str, Any]:
    items = (metadata or {}).get("items", []) if isinstance(metadata, dict) else []
    keys = [item.get("key") for item in items if isinstance(item, dict)]
    for key in keys:
        if not isinstance(key, str) or not re.fullmatch(r"[a-zA-Z0-9_-]{1,128}", key):
            why = "Must be a match of regex '[a-zA-Z0-9-_]{1,128}'"
            raise errors.invalid_value("resource.metadata.items.key", key, why)
    if len(set(keys)) != len(keys):
        raise errors.invalid_value("resource.metadata", "", "Duplicate keys are not allowed.")
    return {"items": [dict(item) for item in items]}


# -- list filters: `labels.team=ml`, `name = "a"`, `status != RUNNING`, joined by AND or
# spaces, in parentheses or not; gcloud sends `(labels.team = "ml")` forms
_TERM = re.compile(r'\s*\(?\s*([A-Za-z][\w.-]*)\s*(=|!=|eq|ne)\s*"?([^"()\s]*)"?\s*\)?\s*')


def parse_filter(text: str) -> list[tuple[str, str, str]]:
    terms: list[tuple[str, str, str]] = []
    rest = text.strip()
    while rest:
        match = _TERM.match(rest)
        if not match:
            raise errors.invalid_value("filter", text, "Invalid list filter expression.")
        terms.append((match.group(1), match.group(2), match.group(3)))
        rest = rest[match.end() :]
        rest = re.sub(r"^(?:AND\s+)", "", rest)
    return terms


def matches(fields: dict[str, Any], terms: list[tuple[str, str, str]]) -> bool:
    for key, op, value in terms:
        have = fields
        for part in key.split("."):
            have = have.get(part) if isinstance(have, dict) else None  # type: ignore[assignment]
        text = "" if have is None else str(have)
        # eq/ne: the old regex form, a full match
        ok = re.fullmatch(value, text) is not None if op in ("eq", "ne") else text == value
        if ok != (op in ("=", "eq")):
            return False
    return True
