"""A metadata server per emulated worker, as a TPU VM sees `metadata.google.internal`.

Served under `/_emulator/v1/metadata/<project>/<zone>/<node>/<worker>/computeMetadata/v1/`,
so one emulator answers for every worker of every node; a process on a worker is pointed
at its own root by `TPUCTL_METADATA_URL`. Like the real server it wants the header
`Metadata-Flavor: Google` (403 without it, or with `X-Forwarded-For`), answers values as
text, directories as one entry a line (`?recursive=true` or `?alt=json`: JSON), and the
token as JSON. The token is a fake, but the emulator remembers whose it is (the node's
service account and scopes, iam/accounts.py) and checks what calls carrying it may do.

Every answer carries an `ETag`; `?wait_for_change=true` (with `last_etag` and
`timeout_sec`, as Compute Engine's server takes them) holds the answer until the value
differs from `last_etag` (or, without it, from the value when asked), or the timeout
(at most 300 s here). That is how a guest watches `instance/preempted`, which turns
TRUE when a preemption's notice begins (control_api.preempt), and stays TRUE.
`instance/maintenance-event` is `NONE`, then, while a host maintenance is ongoing,
`TERMINATE_ON_HOST_MAINTENANCE` (`MIGRATE_ON_HOST_MAINTENANCE` for a Compute Engine VM
that live-migrates); `instance/upcoming-maintenance` the maintenance announced, `{}`
when none (core/maintenance.py). Both are watched with `wait_for_change` like any value.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Mapping
from typing import Any

from tpuctl.emulator.compute import hosts as compute_hosts
from tpuctl.emulator.control.client import CONTROL_PREFIX
from tpuctl.emulator.core import maintenance as host_maintenance
from tpuctl.emulator.core.errors import ApiError
from tpuctl.emulator.offerings.accelerators import AcceleratorType, parse_accelerator
from tpuctl.emulator.tpu.front import render_node
from tpuctl.emulator.tpu.models import project_number, tpu_vm_name

PREFIX = CONTROL_PREFIX + "metadata/"
_PATH = re.compile(
    re.escape(PREFIX)
    + r"(?P<project>[^/]+)/(?P<zone>[^/]+)/(?P<node>[^/]+)/(?P<worker>\d+)"
    + r"/computeMetadata/v1/(?P<rest>.*)$"
)
TOKEN_SECONDS = 3599
_TEXT = "application/text"
_JSON = "application/json"
MAX_WAIT_SECONDS = 300.0

Answer = tuple[int, str, bytes]
Response = tuple[int, str, bytes, dict[str, str]]


def _dims(topology: str) -> list[int]:
    dims = [int(d) for d in topology.split("x")]
    return dims + [1] * (3 - len(dims))


def _bounds(acc: AcceleratorType) -> tuple[str, str]:
    """CHIPS_PER_HOST_BOUNDS and HOST_BOUNDS of tpu-env: one host holds the whole slice,
    or (multi-host) a 2x2x1 block of chips."""
    topo = _dims(acc.topology)
    per_host = topo if acc.workers == 1 else [2, 2, 1]
    hosts = [t // p for t, p in zip(topo, per_host, strict=True)]
    return ",".join(map(str, per_host)), ",".join(map(str, hosts))


def _hostname(node: dict[str, Any], worker: int) -> str:
    return tpu_vm_name(str(node["id"]), worker)


def _instance_id(node: dict[str, Any], worker: int) -> str:
    digest = hashlib.sha256(f"{node['id']}/{worker}".encode()).hexdigest()
    return str(10**18 + int(digest, 16) % (9 * 10**18))


def tpu_env(node: dict[str, Any], project: str, zone: str, worker: int) -> str:
    """The `tpu-env` attribute: YAML of single-quoted strings, keys sorted."""
    acc = parse_accelerator(node["acceleratorType"])
    assert acc is not None
    per_host, hosts = _bounds(acc)
    sched = node.get("schedulingConfig") or {}
    values = {
        "ACCELERATOR_TYPE": acc.name,
        "CHIPS_PER_HOST_BOUNDS": per_host,
        "CONSUMER_PROJECT_ID": project,
        "CONSUMER_PROJECT_NUMBER": project_number(project),
        "HOST_BOUNDS": hosts,
        "NODE_ID": node["name"].rsplit("/", 1)[-1],
        "PREEMPTIBLE": "true" if sched.get("preemptible") or sched.get("spot") else "false",
        "RUNTIME_VERSION": node.get("runtimeVersion", ""),
        "SERVICE_NAME": "tpu.googleapis.com",
        "TOPOLOGY": acc.topology,
        "TYPE": acc.config_type,
        "UID": node["id"],
        "WORKER_ID": str(worker),
        "ZONE": zone,
    }
    return "".join(f"{key}: '{value}'\n" for key, value in values.items())


def attributes(node: dict[str, Any], project: str, zone: str, worker: int) -> dict[str, str]:
    """The node's own metadata, then what the TPU service adds on each worker VM."""
    endpoints = ",".join(
        f"{_hostname(node, k)}:{_instance_id(node, k)}:{ep['ipAddress']}"
        for k, ep in enumerate(node.get("networkEndpoints") or [])
    )
    out = dict(node.get("metadata") or {})
    if node.get("api") == "compute":  # a Compute Engine VM (compute/hosts.py)
        out.update(compute_hosts.attributes(node, worker))
        return out
    out.update(
        {
            "accelerator-type": node["acceleratorType"],
            "agent-worker-number": str(worker),
            "instance-id": _instance_id(node, worker),
            "tpu-env": tpu_env(node, project, zone, worker),
            "worker-network-endpoints": endpoints,
        }
    )
    return out


def _tree(
    node: dict[str, Any],
    project: str,
    zone: str,
    worker: int,
    preempted: bool,
    maintenance: tuple[dict[str, Any] | None, bool] = (None, False),
) -> dict[str, Any]:
    """Every value served, as nested dicts (directories) and strings (values)."""
    account = (node.get("serviceAccount") or {}).get("email", "default")
    scopes = "\n".join((node.get("serviceAccount") or {}).get("scope") or []) + "\n"
    sa = {"email": account, "scopes": scopes, "aliases": "default\n", "token": None}
    hostname = _hostname(node, worker)
    instance_id = _instance_id(node, worker)
    if node.get("api") == "compute":  # a Compute Engine VM: its instance's name and id
        hostname, instance_id = node["instanceNames"][worker], node["instanceIds"][worker]
    ip = node["networkEndpoints"][worker]["ipAddress"]
    return {
        "project": {"project-id": project, "numeric-project-id": project_number(project)},
        "instance": {
            "attributes": attributes(node, project, zone, worker),
            "hostname": f"{hostname}.{zone}.c.{project}.internal",
            "id": instance_id,
            "maintenance-event": host_maintenance.event(*maintenance),
            "upcoming-maintenance": host_maintenance.guest_view(maintenance[0]),
            "name": hostname,
            "preempted": "TRUE" if preempted else "FALSE",
            "zone": f"projects/{project_number(project)}/zones/{zone}",
            "network-interfaces": {"0": {"ip": ip}},
            "service-accounts": {"default": sa, account: sa},
        },
    }


def _token(backend: Any, project: str, account: dict[str, Any]) -> bytes:
    scopes = [s for s in account["scopes"].split("\n") if s]
    token = {
        "access_token": backend.mint_token(account["email"], scopes, project),
        "expires_in": TOKEN_SECONDS,
        "token_type": "Bearer",
    }
    return json.dumps(token).encode()


def _plain(value: Any) -> Any:
    """A directory as JSON: tokens left out, as the real server does in recursive listings."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if v is not None}
    return value


def respond(backend: Any, path: str, query: Mapping[str, str], headers: Any) -> Response:
    """(HTTP status, content type, body, extra headers) for one GET under PREFIX."""
    if headers.get("Metadata-Flavor") != "Google" or headers.get("X-Forwarded-For"):
        return 403, _TEXT, b"Missing required header: Metadata-Flavor: Google\n", {}
    match = _PATH.match(path)
    if not match:
        return 404, _TEXT, b"Not Found\n", {}
    answer = _answer(backend, match, query)
    if query.get("wait_for_change") == "true" and answer[0] == 200:
        try:
            timeout = float(query.get("timeout_sec") or MAX_WAIT_SECONDS)
        except ValueError:
            return 400, _TEXT, b"timeout_sec must be a number of seconds\n", {}
        answer = _wait_for_change(backend, match, query, answer, timeout)
    return (*answer, {"ETag": _etag(answer[2])})


def _etag(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()[:16]


def _wait_for_change(
    backend: Any, match: re.Match[str], query: Mapping[str, str], first: Answer, timeout: float
) -> Answer:
    """The answer once it differs from `last_etag` (or from `first`), or at the timeout.
    Woken by the backend on every change of its state (and its ticker applies due
    transitions, such as the end of a preemption notice, between requests)."""
    seen = query.get("last_etag") or _etag(first[2])
    if seen != _etag(first[2]):
        return first
    deadline = time.monotonic() + min(max(timeout, 0.0), MAX_WAIT_SECONDS)
    with backend.changes:
        while (left := deadline - time.monotonic()) > 0:
            backend.changes.wait(left)
            now = _answer(backend, match, query)
            if now[0] != 200 or _etag(now[2]) != seen:
                return now
    return _answer(backend, match, query)


def _answer(backend: Any, match: re.Match[str], query: Mapping[str, str]) -> Answer:
    project, zone, node_id, worker = (match[k] for k in ("project", "zone", "node", "worker"))
    try:
        with backend.lock:  # the node as the TPU API renders it, read in one piece
            seen, preempted = backend.guest_view(project, zone, node_id)
            node = render_node(seen)
    except ApiError:
        node, preempted = backend.compute_guest_view(project, zone, node_id, int(worker))
        if node is None:
            return 404, _TEXT, f"no node {project}/{zone}/{node_id}\n".encode()
    if int(worker) >= len(node.get("networkEndpoints") or []):
        return 404, _TEXT, f"node {node_id} has no worker {worker}\n".encode()
    maintenance = backend.guest_maintenance(project, zone, node_id, int(worker))
    value: Any = _tree(node, project, zone, int(worker), preempted, maintenance)
    parts = [p for p in match["rest"].split("/") if p]
    for i, part in enumerate(parts):
        if not isinstance(value, dict) or part not in value:
            return 404, _TEXT, b"Not Found\n"
        if part == "token" and i == len(parts) - 1 and value.get("email"):
            backend.requests.count("GET metadata.token")
            return 200, _JSON, _token(backend, project, value)
        value = value[part]
    if isinstance(value, dict):
        if query.get("recursive") == "true" or query.get("alt") == "json":
            return 200, _JSON, json.dumps(_plain(value)).encode()
        listing = "".join(f"{k}/\n" if isinstance(v, dict) else f"{k}\n" for k, v in value.items())
        return 200, _TEXT, listing.encode()
    if query.get("alt") == "json":
        return 200, _JSON, json.dumps(value).encode()
    return 200, _TEXT, str(value).encode()
