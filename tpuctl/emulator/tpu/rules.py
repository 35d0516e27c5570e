"""The service's validation rules, as pure functions raising `ApiError`s."""

from __future__ import annotations

import base64
import random
import re
from collections.abc import Callable, Iterable
from typing import Any

from tpuctl.emulator.core import errors
from tpuctl.emulator.core.timestamps import parse_rfc3339
from tpuctl.emulator.offerings import accelerators, runtimes, zones
from tpuctl.emulator.offerings.accelerators import AcceleratorType
from tpuctl.emulator.tpu import schema
from tpuctl.emulator.tpu.models import DEFAULT_SCOPES, AddressAllocator, Node, project_number

NODE_ID_RE = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
LABEL_KEY_RE = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
LABEL_VALUE_RE = re.compile(r"^[a-z0-9_-]{0,63}$")
MASK_PATHS = ("description", "tags", "labels", "metadata", "network_config.enable_external_ips")
# acceleratorConfig.type arrives as a number from clients asking for enum-encoding=int
CONFIG_TYPES = {
    0: "TYPE_UNSPECIFIED",
    2: "V2",
    4: "V3",
    7: "V4",
    9: "V5LITE_POD",
    10: "V5P",
    11: "V6E",
}

_DURATION_RE = re.compile(r"^(\d+(?:\.\d+)?)s$")


def parse_duration(value: Any, field_name: str) -> float:
    """A google.protobuf.Duration in JSON (`3600s`), in seconds."""
    match = _DURATION_RE.match(str(value))
    if not match:
        raise errors.invalid_argument(
            f"Invalid value for field '{field_name}': '{value}' (a duration like '3600s')",
            field_name,
        )
    return float(match.group(1))


def parse_time(value: Any, field_name: str) -> float:
    """A google.protobuf.Timestamp in JSON (RFC 3339), in Unix seconds."""
    try:
        return parse_rfc3339(str(value)).timestamp()  # 9 digits too, on Python 3.10
    except ValueError:
        raise errors.invalid_argument(
            f"Invalid value for field '{field_name}': '{value}' (an RFC 3339 time)", field_name
        ) from None


def check_zone(project: str, zone: str, permission: str, any_zone: bool = False) -> None:
    """Unknown zones are refused as the real service does: as a permission problem."""
    if zone not in zones.ZONES and not (any_zone and zone == "-"):
        raise errors.permission_denied_location(project, zone, permission)


def page(items: list[Any], page_size: int, page_token: str) -> tuple[list[Any], str | None]:
    """One page of `items` and the token of the next one (None on the last page)."""
    start = 0
    if page_token:
        try:
            start = int(base64.urlsafe_b64decode(page_token.encode()).decode())
        except ValueError:
            raise errors.invalid_argument("The page token is invalid.", "page_token") from None
    if page_size < 0:
        raise errors.invalid_argument("pageSize must not be negative.", "page_size")
    end = len(items) if page_size == 0 else start + page_size
    token = base64.urlsafe_b64encode(str(end).encode()).decode() if end < len(items) else None
    return items[start:end], token


def in_location(
    resources: Iterable[Any], project: str, zone: str, order: Callable[[Any], Any] | None = None
) -> list[Any]:
    """The resources of `project` in `zone` (`-`: in every zone), by name or by `order`."""
    mine = (r for r in resources if r.project == project and zone in ("-", r.zone))
    return sorted(mine, key=order or (lambda r: r.name))


def listing(
    key: str,
    items: list[Any],
    page_size: int,
    page_token: str,
    render: Callable[[Any], dict[str, Any]] | None = None,
    unreachable: bool = False,
) -> dict[str, Any]:
    """A list response: one page of `items` (each `render`ed) under `key`, then
    `unreachable` (for the resources whose list has it) and `nextPageToken` if more."""
    items, token = page(items, page_size, page_token)
    out: dict[str, Any] = {key: [render(i) for i in items] if render else items}
    if unreachable:
        out["unreachable"] = []
    if token:
        out["nextPageToken"] = token
    return out


def label_problem(labels: Any) -> str | None:
    """What is wrong with a label map, or None."""
    if not isinstance(labels, dict):
        return "labels must be a map of strings"
    if len(labels) > 64:
        return f"at most 64 labels are allowed, got {len(labels)}"
    for key, value in labels.items():
        if not isinstance(key, str) or not LABEL_KEY_RE.match(key):
            return (
                f"label key '{key}' must be 1-63 characters, start with a lowercase letter "
                "and use only lowercase letters, digits, '_' and '-'"
            )
        if not isinstance(value, str) or not LABEL_VALUE_RE.match(value):
            return (
                f"label value '{value}' of key '{key}' must be at most 63 characters of "
                "lowercase letters, digits, '_' and '-'"
            )
    return None


def check_labels(labels: Any) -> dict[str, str]:
    problem = label_problem(labels)
    if problem:
        raise errors.invalid_argument(f"resource labels are invalid: {problem}", "labels")
    return dict(labels)


def update_paths(update_mask: str) -> list[str]:
    """The mask's paths in snake case (clients send either case), all of them updatable."""
    paths = [
        re.sub(r"[A-Z]", lambda m: "_" + m.group(0).lower(), p.strip())
        for p in update_mask.split(",")
    ]
    paths = [p for p in paths if p]
    if not paths:
        raise errors.invalid_argument("The updateMask parameter is required.", "update_mask")
    for path in paths:
        if path not in MASK_PATHS:
            raise errors.invalid_argument(
                f"Invalid update mask path '{path}': the fields that can be updated are "
                + ", ".join(MASK_PATHS),
                "update_mask",
            )
    return paths


def check_fields(message: str, body: dict[str, Any], root: str) -> dict[str, Any]:
    """Refuse a body with fields `message` does not have, as Google's front end (ESF)
    does before the service sees it: 400 INVALID_ARGUMENT, one line and one field
    violation per unknown name (`Invalid JSON payload received. Unknown name "x" at
    'node': Cannot find field.`). `root` names the request field the body fills
    (`node`, `queued_resource`); "" when the body is the whole request. Returns the
    body with every field named in lowerCamelCase (proto JSON takes snake_case too)."""
    unknown = schema.unknown_fields(message, body, root)
    if not unknown:
        return dict(schema.camel_case(message, body))
    lines, violations = [], []
    for where, name in unknown:
        at = f" at '{where}'" if where else ""
        line = f'Invalid JSON payload received. Unknown name "{name}"{at}: Cannot find field.'
        lines.append(line)
        violations.append({"field": where, "description": line})
    details = [{"@type": errors.BAD_REQUEST_TYPE, "fieldViolations": violations}]
    raise errors.ApiError(400, "INVALID_ARGUMENT", "\n".join(lines), details)


def check_scheduling(sched: dict[str, Any]) -> None:
    """Spot and preemptible exclude each other (the API reference: spot "cannot be
    combined with preemptible"; wording of the refusal guessed)."""
    if sched.get("spot") and sched.get("preemptible"):
        raise errors.bad_request(
            "schedulingConfig cannot set both spot and preemptible: spot is the newer "
            "preemptible model, pick one"
        )


def accelerator(zone: str, body: dict[str, Any]) -> AcceleratorType:
    """The accelerator a create asks for, by name or by config (default v2-8), in `zone`."""
    name = body.get("acceleratorType")
    config = body.get("acceleratorConfig")
    if name and config:
        # gcloud makes them mutually exclusive flags (--accelerator-type vs --type and
        # --topology, command_lib/compute/tpus/tpu_vm/flags.yaml); the API refuses both.
        raise errors.bad_request(
            "acceleratorType and acceleratorConfig cannot both be set: name the "
            "accelerator by one of them"
        )
    if name:
        acc = accelerators.parse_accelerator(str(name))
    elif config:
        kind = config.get("type", 0)
        kind = CONFIG_TYPES.get(kind, str(kind)) if isinstance(kind, int) else str(kind)
        topology = str(config.get("topology", ""))
        name = f"{kind} {topology}"
        acc = accelerators.accelerator_for_config(kind, topology)
    else:
        name = accelerators.API_DEFAULT_ACCELERATOR
        acc = accelerators.parse_accelerator(name)
    if acc is None or acc not in zones.accelerator_types(zone):
        raise errors.bad_request(f"the accelerator {name} was not found in zone {zone}")
    return acc


def new_node(
    project: str,
    zone: str,
    node_id: str,
    body: dict[str, Any],
    now: float,
    allocator: AddressAllocator,
) -> Node:
    """A CREATING node built from a create request, once every rule passed."""
    if not node_id:
        raise errors.invalid_argument("The nodeId parameter is required.", "node_id")
    if not NODE_ID_RE.match(node_id):
        raise errors.invalid_argument(
            f"Invalid value for field 'nodeId': '{node_id}'. Must be a match of regex "
            "'[a-z]([-a-z0-9]{0,61}[a-z0-9])?'",
            "node_id",
        )
    acc = accelerator(zone, body)
    runtime = str(body.get("runtimeVersion") or "")
    if not runtime:
        raise errors.invalid_argument("Field runtimeVersion is required.", "runtime_version")
    if runtime not in runtimes.runtime_versions(zone):
        raise errors.bad_request(f"runtime version {runtime} was not found in zone {zone}")
    if acc.generation not in runtimes.RUNTIMES[runtime]:
        raise errors.bad_request(
            f"runtime version {runtime} is not supported for accelerator type {acc.name}"
        )
    sched = body.get("schedulingConfig") or {}
    check_scheduling(sched)
    labels = check_labels(body.get("labels") or {})
    net = body.get("networkConfig") or {}
    network = str(net.get("network") or "default")
    if "/" not in network:
        network = f"projects/{project}/global/networks/{network}"
    subnetwork = str(net.get("subnetwork") or "default")
    if "/" not in subnetwork:
        subnetwork = f"projects/{project}/regions/{zones.region_of(zone)}/subnetworks/{subnetwork}"
    account = body.get("serviceAccount") or {}
    email = (
        account.get("email") or f"{project_number(project)}-compute@developer.gserviceaccount.com"
    )
    return Node(
        project=project,
        zone=zone,
        node_id=node_id,
        accelerator_type=acc.name,
        runtime_version=runtime,
        uid=str(random.randrange(10**18, 2**63)),
        create_time=now,
        addresses=allocator.allocate(acc.workers),
        description=str(body.get("description") or ""),
        labels=labels,
        metadata={str(k): str(v) for k, v in (body.get("metadata") or {}).items()},
        tags=[str(t) for t in body.get("tags") or []],
        network=network,
        subnetwork=subnetwork,
        enable_external_ips=bool(net.get("enableExternalIps")),
        can_ip_forward=bool(net.get("canIpForward")),
        cidr_block=str(body.get("cidrBlock") or "10.128.0.0/20"),
        service_account={"email": email, "scope": list(account.get("scope") or DEFAULT_SCOPES)},
        scheduling={k: bool(sched.get(k)) for k in ("preemptible", "spot", "reserved")},
        data_disks=list(body.get("dataDisks") or []),
        shielded_instance_config=body.get("shieldedInstanceConfig"),
    )


def apply_update(node: Node, paths: list[str], body: dict[str, Any]) -> None:
    """Copy the masked fields of `body` onto `node` (a field absent from body is cleared)."""
    if "labels" in paths:
        node.labels = check_labels(body.get("labels") or {})
    if "description" in paths:
        node.description = str(body.get("description") or "")
    if "tags" in paths:
        node.tags = [str(t) for t in body.get("tags") or []]
    if "metadata" in paths:
        node.metadata = {str(k): str(v) for k, v in (body.get("metadata") or {}).items()}
    if "network_config.enable_external_ips" in paths:
        node.enable_external_ips = bool((body.get("networkConfig") or {}).get("enableExternalIps"))


def worker_ids(body: dict[str, Any], workers: int) -> list[int]:
    """The workers a guest-attributes query asks for, in worker order (all when none)."""
    if not body.get("workerIds"):
        return list(range(workers))
    try:
        wanted = {int(w) for w in body["workerIds"]}
    except (TypeError, ValueError):
        raise errors.invalid_argument("workerIds must be numbers.", "worker_ids") from None
    bad = sorted(w for w in wanted if not 0 <= w < workers)
    if bad:
        raise errors.invalid_argument(
            f"Worker id {bad[0]} is out of range: the node has {workers} workers.", "worker_ids"
        )
    return sorted(wanted)
