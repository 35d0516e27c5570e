"""The Cloud TPU v2 messages the emulator reads and writes, and the two things the
real front end does with them: find request fields it does not know (`rules` refuses
them), and render responses as proto3 JSON (default values left out).

The field table is the v2 discovery document's (`tpu.v2.json`, shipped with
google-api-python-client: `googleapiclient/discovery_cache/documents/tpu.v2.json`);
`tests/emulator/test_schema.py` checks that it still is. A field's spec: `""` a scalar
(string, number, boolean, enum), `"[]"` a list of scalars, `"{}"` a map of strings,
`"Name"` a message, `"[Name]"` a list of messages.
"""

from __future__ import annotations

import re
from typing import Any

MESSAGES: dict[str, dict[str, str]] = {
    "Node": {
        "acceleratorConfig": "AcceleratorConfig",
        "acceleratorType": "",
        "apiVersion": "",
        "bootDiskConfig": "BootDiskConfig",
        "cidrBlock": "",
        "createTime": "",
        "dataDisks": "[AttachedDisk]",
        "description": "",
        "health": "",
        "healthDescription": "",
        "id": "",
        "labels": "{}",
        "metadata": "{}",
        "multisliceNode": "",
        "name": "",
        "networkConfig": "NetworkConfig",
        "networkConfigs": "[NetworkConfig]",
        "networkEndpoints": "[NetworkEndpoint]",
        "protectionTier": "",
        "queuedResource": "",
        "runtimeVersion": "",
        "schedulingConfig": "SchedulingConfig",
        "serviceAccount": "ServiceAccount",
        "shieldedInstanceConfig": "ShieldedInstanceConfig",
        "state": "",
        "symptoms": "[Symptom]",
        "tags": "[]",
        "upcomingMaintenance": "UpcomingMaintenance",
    },
    "AcceleratorConfig": {"topology": "", "type": ""},
    "AttachedDisk": {"mode": "", "sourceDisk": ""},
    "BootDiskConfig": {"customerEncryptionKey": "CustomerEncryptionKey"},
    "CustomerEncryptionKey": {"kmsKeyName": ""},
    "NetworkConfig": {
        "canIpForward": "",
        "enableExternalIps": "",
        "network": "",
        "queueCount": "",
        "subnetwork": "",
    },
    "NetworkEndpoint": {"accessConfig": "AccessConfig", "ipAddress": "", "port": ""},
    "AccessConfig": {"externalIp": ""},
    "SchedulingConfig": {"preemptible": "", "reserved": "", "spot": ""},
    "ServiceAccount": {"email": "", "scope": "[]"},
    "ShieldedInstanceConfig": {"enableSecureBoot": ""},
    "Symptom": {"createTime": "", "details": "", "symptomType": "", "workerId": ""},
    "UpcomingMaintenance": {
        "canReschedule": "",
        "latestWindowStartTime": "",
        "maintenanceStatus": "",
        "type": "",
        "windowEndTime": "",
        "windowStartTime": "",
    },
    "QueuedResource": {
        "createTime": "",
        "guaranteed": "Guaranteed",
        "name": "",
        "queueingPolicy": "QueueingPolicy",
        "reservationName": "",
        "spot": "Spot",
        "state": "QueuedResourceState",
        "tpu": "Tpu",
    },
    "Tpu": {"nodeSpec": "[NodeSpec]"},
    "NodeSpec": {
        "multisliceParams": "MultisliceParams",
        "node": "Node",
        "nodeId": "",
        "parent": "",
    },
    "MultisliceParams": {"nodeCount": "", "nodeIdPrefix": ""},
    "Spot": {},
    "Guaranteed": {"minDuration": ""},
    "QueueingPolicy": {
        "validAfterDuration": "",
        "validAfterTime": "",
        "validInterval": "Interval",
        "validUntilDuration": "",
        "validUntilTime": "",
    },
    "Interval": {"endTime": "", "startTime": ""},
    "QueuedResourceState": {
        "acceptedData": "AcceptedData",
        "activeData": "ActiveData",
        "creatingData": "CreatingData",
        "deletingData": "DeletingData",
        "failedData": "FailedData",
        "provisioningData": "ProvisioningData",
        "state": "",
        "stateInitiator": "",
        "suspendedData": "SuspendedData",
        "suspendingData": "SuspendingData",
    },
    "AcceptedData": {},
    "ActiveData": {},
    "CreatingData": {},
    "DeletingData": {},
    "ProvisioningData": {},
    "SuspendedData": {},
    "SuspendingData": {},
    "FailedData": {"error": "Status"},
    "Status": {"code": "", "details": "[]", "message": ""},
    "GetGuestAttributesRequest": {"queryPath": "", "workerIds": "[]"},
    "StopNodeRequest": {},
    "StartNodeRequest": {},
}


def _camel(name: str) -> str:
    return re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), name)


def _snake(name: str) -> str:
    return re.sub(r"[A-Z]", lambda m: "_" + m.group(0).lower(), name)


def unknown_fields(message: str, value: Any, path: str = "") -> list[tuple[str, str]]:
    """(where, name) of every field in `value` that `message` does not have; `where` is
    the snake_case path from `path` (the request field the body fills), as ESF names it."""
    if not isinstance(value, dict):
        return []  # a wrong type is not what this checks
    fields = MESSAGES[message]
    found: list[tuple[str, str]] = []
    for name, item in value.items():
        spec = fields.get(name, fields.get(_camel(name)))  # proto JSON takes both spellings
        if spec is None:
            found.append((path, name))
            continue
        inner = f"{path}.{_snake(_camel(name))}" if path else _snake(_camel(name))
        if spec.startswith("[") and len(spec) > 2 and isinstance(item, list):
            for i, element in enumerate(item):
                found += unknown_fields(spec[1:-1], element, f"{inner}[{i}]")
        elif spec[:1].isupper():
            found += unknown_fields(spec, item, inner)
    return found


def camel_case(message: str, value: Any) -> Any:
    """`value` with its known fields named in lowerCamelCase, as proto JSON parsers take
    either spelling (`accelerator_type` or `acceleratorType`); map keys stay as sent."""
    if not isinstance(value, dict):
        return value
    fields = MESSAGES[message]
    out: dict[str, Any] = {}
    for name, item in value.items():
        key = name if name in fields else _camel(name)
        spec = fields.get(key, "")
        if spec.startswith("[") and len(spec) > 2 and isinstance(item, list):
            item = [camel_case(spec[1:-1], element) for element in item]
        elif spec[:1].isupper():
            item = camel_case(spec, item)
        out[key] = item
    return out


def _is_default(value: Any) -> bool:
    if value is None or value is False or value == "" or value == [] or value == {}:
        return True
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value == 0
    return isinstance(value, str) and value.endswith("_UNSPECIFIED")  # an enum's zero value


def render(message: str, data: dict[str, Any]) -> dict[str, Any]:
    """`data` as proto3 JSON renders the message: scalars at their default value, empty
    lists and empty maps are left out; a message field that is set stays, `{}` when all
    its fields are defaults (as the real API answers `schedulingConfig: {}`)."""
    fields = MESSAGES[message]
    out: dict[str, Any] = {}
    for name, value in data.items():
        spec = fields.get(name, "")  # keys of other kinds (e.g. `@type`) pass as they are
        if value is None:
            continue
        if spec[:1].isupper() and isinstance(value, dict):
            out[name] = render(spec, value)
        elif spec.startswith("[") and len(spec) > 2 and isinstance(value, list):
            if value:
                out[name] = [render(spec[1:-1], v) for v in value]
        elif name == "@type" or not _is_default(value):
            out[name] = value
    return out
