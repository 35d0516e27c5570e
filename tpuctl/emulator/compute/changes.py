"""How Compute Engine reads a change's request before doing it: its `requestId` (a
retry gets the first request's operation, `once`) and an insert's
`sourceInstanceTemplate` (the template's properties under the body's, `from_template`).
The caller (the facade) holds the lock, as for api.py's methods."""

from __future__ import annotations

import copy
import re
from typing import Any

from tpuctl.emulator.compute import errors, rules
from tpuctl.emulator.compute.models import ZoneOperation
from tpuctl.emulator.core.state import State


def once(state: State, request_id: str, fn: Any, project: str, *args: Any) -> ZoneOperation:
    """`fn(state, project, *args)`, an insert, delete or other change, asked with the query
    parameter `requestId` (or ""): a request whose id a kept operation of the project was
    made with is not done again, and that first operation is the answer (each mutating
    method's reference: "if you must retry your request, the server will know to ignore
    the request if it has already been completed", e.g.
    https://cloud.google.com/compute/docs/reference/rest/v1/instances/insert)."""
    if not request_id:
        op: ZoneOperation = fn(state, project, *args)
        return op
    rules.check_request_id(request_id)
    first = state.compute.by_request(project, request_id)
    if first is not None:
        return first
    op = fn(state, project, *args)
    op.request_id = request_id
    state.changed()
    return op


def from_template(state: State, project: str, zone: str, body: Any, source: str) -> Any:
    """The body an insert with `sourceInstanceTemplate` (a full or partial URL of a global
    or regional template) stands for: the template's properties, its machine type in the
    zone, with the body's own fields over them ("sourceInstanceTemplate: Specifies
    instance template to create the instance", instances.insert's reference; Google's
    `create_from_template` sample sends the name alone)."""
    if not source:
        return body
    rules.check_zone(zone, project)
    match = re.search(
        r"(?:^|/)(?:projects/([^/]+)/)?((?:regions/[^/]+|global)/instanceTemplates/[^/]+)$", source
    )
    if not match:
        why = "Must be a URL of an instanceTemplates resource."
        raise errors.invalid_value("sourceInstanceTemplate", source, why)
    path = f"projects/{match.group(1) or project}/{match.group(2)}"
    if path not in state.compute.templates:
        raise errors.not_found(path)
    props = copy.deepcopy(state.compute.templates[path].properties)
    props["machineType"] = f"zones/{zone}/machineTypes/{props.get('machineType', '')}"
    return {**props, **(body if isinstance(body, dict) else {})}
