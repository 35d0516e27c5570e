"""Every response the emulator sends, checked against the TPU v2 discovery document that
ships with google-api-python-client (`discovery_cache/documents/tpu.v2.json`): field
names exist, types and enum values match. And the emulator's own field table
(`tpuctl.emulator.tpu.schema`) is that document's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import googleapiclient
import pytest

from tests.emulator.test_strict import call, create
from tpuctl.emulator.tpu.schema import MESSAGES

DOCUMENT = Path(googleapiclient.__file__).parent / "discovery_cache/documents/tpu.v2.json"
SCHEMAS: dict[str, Any] = json.loads(DOCUMENT.read_text())["schemas"]
ZONE = "us-central1-a"
LOC = f"projects/p/locations/{ZONE}"
V3 = {"acceleratorType": "v3-8", "runtimeVersion": "tpu-ubuntu2204-base"}


def _spec(prop: dict[str, Any]) -> str:
    if "$ref" in prop:
        return str(prop["$ref"])
    if prop["type"] == "array":
        return "[" + prop["items"].get("$ref", "") + "]"
    if prop["type"] == "object":
        return "{}" if "additionalProperties" in prop else "*"
    return ""


def test_the_emulators_field_table_is_the_discovery_documents() -> None:
    for message, fields in MESSAGES.items():
        document = {f: _spec(p) for f, p in SCHEMAS[message].get("properties", {}).items()}
        if message == "Status":  # details: a list of Any, which the table keeps as scalars
            document["details"] = "[]"
        assert fields == document, message


def _any_schema(value: dict[str, Any]) -> str | None:
    kind = str(value.get("@type", "")).rsplit("/", 1)[-1]
    if kind.startswith("google.cloud.tpu.v2."):
        return kind.rsplit(".", 1)[-1]
    return "Empty" if kind == "google.protobuf.Empty" else None


def problems(schema: str, value: Any, path: str = "") -> list[str]:
    """What in `value` the discovery document's `schema` does not allow."""
    if not isinstance(value, dict):
        return [f"{path or schema}: an object expected, got {value!r}"]
    props = SCHEMAS[schema].get("properties", {})
    found = []
    for name, item in value.items():
        where = f"{path}.{name}" if path else name
        if name == "@type":
            continue
        if name not in props:
            found.append(f"{where}: no field {name!r} in {schema}")
            continue
        found += _check(props[name], item, where)
    return found


def _check(prop: dict[str, Any], item: Any, where: str) -> list[str]:
    if "$ref" in prop:
        return problems(prop["$ref"], item, where)
    kind = prop.get("type")
    if kind == "array":
        if not isinstance(item, list):
            return [f"{where}: a list expected, got {item!r}"]
        return [p for i, e in enumerate(item) for p in _check(prop["items"], e, f"{where}[{i}]")]
    if kind == "object":
        if not isinstance(item, dict):
            return [f"{where}: an object expected, got {item!r}"]
        if prop.get("additionalProperties", {}).get("type") not in (None, "any"):
            inner = prop["additionalProperties"]
            return [p for k, v in item.items() for p in _check(inner, v, f"{where}.{k}")]
        inner_schema = _any_schema(item)  # an Any: checked as the type it names
        return problems(inner_schema, item, where) if inner_schema else []
    if kind == "string":
        if not isinstance(item, str):
            return [f"{where}: a string expected, got {item!r}"]
        if "enum" in prop and item not in prop["enum"]:
            return [f"{where}: {item!r} is none of {prop['enum']}"]
        if prop.get("format") in ("int64", "uint64") and not item.lstrip("-").isdigit():
            return [f"{where}: an int64 expected, got {item!r}"]
        return []
    if kind == "boolean":
        return [] if isinstance(item, bool) else [f"{where}: a boolean expected, got {item!r}"]
    if kind == "integer":
        if prop.get("format") in ("int64", "uint64"):  # int64 travels as a JSON string
            ok = isinstance(item, str) and item.lstrip("-").isdigit()
        else:
            ok = isinstance(item, int) and not isinstance(item, bool)
        return [] if ok else [f"{where}: an {prop.get('format')} expected, got {item!r}"]
    return [f"{where}: unchecked type {kind}"]


def get(emulator, path: str) -> dict[str, Any]:
    status, answer = call(emulator, "GET", path)
    assert status == 200, answer
    return answer


def post(emulator, path: str, body: Any) -> dict[str, Any]:
    status, answer = call(emulator, "POST", path, body)
    assert status == 200, answer
    return answer


def test_every_response_fits_the_discovery_document(emulator) -> None:
    seen: list[tuple[str, dict[str, Any]]] = []
    plain = create(emulator, "plain", V3)
    spot = create(emulator, "spot", {**V3, "schedulingConfig": {"spot": True}, "labels": {"a": "b"},
                                     "networkConfig": {"enableExternalIps": True}, "tags": ["t"],
                                     "metadata": {"k": "v"}, "description": "d"})  # fmt: skip
    pod = create(emulator, "pod", {"acceleratorType": "v4-32", "runtimeVersion": "v2-alpha-tpuv4"},
                 zone="us-central2-b")  # fmt: skip
    seen += [("Operation", plain), ("Operation", spot), ("Operation", pod)]
    name = plain["response"]["name"]
    emulator.set_node_state(
        name, health="UNHEALTHY_MAINTENANCE", healthDescription="maintenance",
        symptoms=[{"symptomType": "LOW_MEMORY", "details": "low", "workerId": "0"}],
    )  # fmt: skip
    seen.append(("Node", get(emulator, f"/v2/{name}")))
    seen.append(("ListNodesResponse", get(emulator, "/v2/projects/p/locations/-/nodes")))
    body = {"queryPath": "hostkeys/"}
    attrs = post(emulator, f"/v2/{pod['response']['name']}:getGuestAttributes", body)
    assert len(attrs["guestAttributes"]) == 4
    seen.append(("GetGuestAttributesResponse", attrs))
    spot_name = spot["response"]["name"]
    seen.append(("Operation", post(emulator, f"/v2/{spot_name}:stop", {})))
    seen.append(("Operation", post(emulator, f"/v2/{spot_name}:start", {})))
    status, patched = call(emulator, "PATCH", f"/v2/{spot_name}?updateMask=labels", {"labels": {}})
    assert status == 200
    seen.append(("Operation", patched))
    seen.append(("ListOperationsResponse", get(emulator, f"/v2/{LOC}/operations")))
    seen.append(("Operation", get(emulator, f"/v2/{plain['name']}")))
    seen.append(("ListAcceleratorTypesResponse", get(emulator, f"/v2/{LOC}/acceleratorTypes")))
    seen.append(("AcceleratorType", get(emulator, f"/v2/{LOC}/acceleratorTypes/v3-8")))
    seen.append(("ListRuntimeVersionsResponse", get(emulator, f"/v2/{LOC}/runtimeVersions")))
    version = f"/v2/{LOC}/runtimeVersions/tpu-ubuntu2204-base"
    seen.append(("RuntimeVersion", get(emulator, version)))
    seen.append(("ListLocationsResponse", get(emulator, "/v2/projects/p/locations")))
    seen.append(("Location", get(emulator, f"/v2/{LOC}")))

    spec = {"parent": LOC, "nodeId": "qn", "node": V3}
    queued = {
        "tpu": {"nodeSpec": [spec]},
        "spot": {},
        "queueingPolicy": {"validUntilDuration": "600s"},
    }
    seen.append(
        ("Operation", post(emulator, f"/v2/{LOC}/queuedResources?queuedResourceId=q", queued))
    )
    seen.append(("QueuedResource", get(emulator, f"/v2/{LOC}/queuedResources/q")))
    emulator.capacity({ZONE: {"v3": 0}})
    failing = {"tpu": {"nodeSpec": [{**spec, "nodeId": "fn"}]}}
    post(emulator, f"/v2/{LOC}/queuedResources?queuedResourceId=f", failing)
    emulator.fail_queued(f"{LOC}/queuedResources/f", "stockout")
    seen.append(("ListQueuedResourcesResponse", get(emulator, f"/v2/{LOC}/queuedResources")))
    assert {q["state"]["state"] for q in seen[-1][1]["queuedResources"]} == {"ACTIVE", "FAILED"}

    for q in ("q", "f"):
        status, _ = call(emulator, "DELETE", f"/v2/{LOC}/queuedResources/{q}?force=true")
        assert status == 200
    for op in (plain, pod):
        status, deleted = call(emulator, "DELETE", f"/v2/{op['response']['name']}")
        seen.append(("Operation", deleted))
    status, deleted = call(emulator, "DELETE", f"/v2/{spot_name}")
    assert status == 200

    for schema, answer in seen:
        assert problems(schema, answer) == [], (schema, answer)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"state": "ASLEEP"}, "state: 'ASLEEP' is none of"),
        ({"schedulingConfig": {"spot": "yes"}}, "schedulingConfig.spot: a boolean expected"),
        ({"labelz": {}}, "labelz: no field 'labelz' in Node"),
        ({"id": "12a"}, "id: an int64 expected"),
        ({"networkEndpoints": [{"port": "8470"}]}, "networkEndpoints[0].port: an int32"),
    ],
)
def test_the_check_finds_what_does_not_fit(value: dict[str, Any], expected: str) -> None:
    assert any(p.startswith(expected) for p in problems("Node", value))
