"""Enums as numbers, for the REST clients that ask for them.

google-cloud-tpu's REST transport sends `$alt=json;enum-encoding=int` with every call
(`transports/rest_base.py`: `query_params["$alt"] = "json;enum-encoding=int"`), and
Google's front end then writes every enum of the answer as its number, as proto3 JSON
allows. A client whose protos predate a value (google-cloud-tpu 1.19.1 and
`AcceleratorConfig.Type.V5LITE_POD`) cannot parse the name, but keeps a number it does
not know. The numbers are the protos' own, read from google-cloud-tpu's installed
messages (`google.cloud.tpu_v2.types`, `tpu_v2alpha1.types`), never written here.

The answer's message is the response type of the RPC whose HTTP rule matches the REST
call (`grpc_front`'s tables); a packed `Any` (an operation's `response` and
`metadata`) is read by its `@type`. A field the protos do not know (a v2alpha1 field
newer than the installed client) keeps its value as it is.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from tpuctl.emulator.tpu import grpc_front


def wants_numbers(query: dict[str, str]) -> bool:
    """Whether the call asked for enums as numbers (`$alt=json;enum-encoding=int`)."""
    return "enum-encoding=int" in query.get("$alt", "")


def as_numbers(method: str, path: str, answer: Any) -> Any:
    """`answer`, the JSON of `method path`, with its enums written as their numbers."""
    descriptor = _response_descriptor(method, path)
    return answer if descriptor is None else _message(answer, descriptor)


@functools.cache
def _rules() -> list[tuple[str, re.Pattern[str], str, str]]:
    """(HTTP method, path regex, API version, response type) of every RPC, for v2 and
    for v2alpha1, whose REST paths are v2's under `/v2alpha1`."""
    field = re.compile(r"\{[\w.]+=([^}]+)\}")
    tables = (
        grpc_front.NODE_RPCS + grpc_front.QUEUED_RPCS,
        grpc_front.OPERATION_RPCS + grpc_front.LOCATION_RPCS,
    )
    out = []
    for version in ("v2", "v2alpha1"):
        for rpcs in tables:
            for rpc in rpcs:
                uri = rpc.uri.replace("/v2/", f"/{version}/", 1)
                parts = field.split(uri)  # literal, template, literal, ...
                regex = "".join(
                    grpc_front.template_pattern(p).pattern if i % 2 else re.escape(p)
                    for i, p in enumerate(parts)
                )
                out.append((rpc.http, re.compile(regex), version, rpc.response))
    return out


def _response_descriptor(method: str, path: str) -> Any:
    for http, regex, version, response in _rules():
        if http == method and regex.fullmatch(path):
            return _descriptor(version, response)
    return None


@functools.cache
def _descriptor(version: str, name: str) -> Any:
    from google.cloud import tpu_v2, tpu_v2alpha1
    from google.cloud.location import locations_pb2
    from google.longrunning import operations_pb2
    from google.protobuf import empty_pb2

    if name == "Operation":
        return operations_pb2.Operation.DESCRIPTOR
    if name == "Empty":
        return empty_pb2.Empty.DESCRIPTOR
    for module in (tpu_v2alpha1 if version == "v2alpha1" else tpu_v2, locations_pb2):
        found = getattr(module, name, None)
        if found is not None:
            return (found.pb() if hasattr(found, "pb") else found).DESCRIPTOR
    return operations_pb2.ListOperationsResponse.DESCRIPTOR  # the one left: the mixin's


def _packed(type_url: str) -> Any:
    from google.protobuf import descriptor_pool

    try:
        return descriptor_pool.Default().FindMessageTypeByName(type_url.rsplit("/", 1)[-1])
    except KeyError:
        return None


def _message(value: Any, descriptor: Any) -> Any:
    if not isinstance(value, dict):
        return value  # well-known types in JSON (Timestamp, Duration) are strings
    if descriptor.full_name == "google.protobuf.Any":
        inner = _packed(str(value.get("@type", "")))
        if inner is None:
            return value
        descriptor = inner
    out: dict[str, Any] = {}
    for key, item in value.items():
        field = descriptor.fields_by_camelcase_name.get(key) or descriptor.fields_by_name.get(key)
        out[key] = item if field is None else _field(field, item)
    return out


def _field(field: Any, item: Any) -> Any:
    entry = field.message_type
    if entry is not None and entry.GetOptions().map_entry:
        value_field = entry.fields_by_name["value"]
        return {k: _single(value_field, v) for k, v in item.items()}
    if isinstance(item, list):
        return [_single(field, v) for v in item]
    return _single(field, item)


def _single(field: Any, item: Any) -> Any:
    if field.enum_type is not None and isinstance(item, str):
        value = field.enum_type.values_by_name.get(item)
        return item if value is None else value.number
    if field.message_type is not None:
        return _message(item, field.message_type)
    return item
