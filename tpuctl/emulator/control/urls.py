"""The control plane's paths (`/_emulator/v1/...`, `client.CONTROL_PREFIX`): each to the
backend method that answers it, the body keys it takes, and how its answer is rendered
when it is a TPU resource (as the TPU API renders it, `tpu/front.py`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

from tpuctl.emulator.control.client import CONTROL_PREFIX
from tpuctl.emulator.core import errors
from tpuctl.emulator.tpu.front import render_node, render_queued_resource

Render = Callable[[Any], Any]


def _nodes(nodes: list[Any]) -> list[dict[str, Any]]:
    return [render_node(n) for n in nodes]


_qr = render_queued_resource


def _queued(requests: list[Any]) -> list[dict[str, Any]]:
    return [render_queued_resource(q) for q in requests]


# (HTTP method, path under CONTROL_PREFIX) -> backend method (`a.b`: of the backend's
# `a`), body keys, and the renderer of its answer (None: JSON already)
CONTROL_ROUTES: dict[tuple[str, str], tuple[str, tuple[str, ...], Render | None]] = {
    ("GET", "status"): ("status", (), None),
    ("GET", "config"): ("config", (), None),
    ("POST", "config"): ("update_config", ("body",), None),
    ("POST", "reset"): ("reset", (), None),
    ("GET", "faults"): ("faults_config", (), None),
    ("POST", "faults"): ("set_faults", ("body",), None),
    ("POST", "advance"): ("advance", ("node?",), None),
    ("GET", "nodes"): ("all_nodes", (), _nodes),
    ("GET", "instances"): ("all_instances", (), None),
    ("GET", "requests"): ("requests.counts", (), None),
    ("GET", "requests/bodies"): ("requests.bodies", ("method?",), None),
    ("POST", "guest-attributes"): ("set_guest_attributes", ("node", "worker", "items"), None),
    ("POST", "preempt"): ("preempt", ("node", "notice?"), render_node),
    ("POST", "compute/preempt"): ("compute_preempt", ("instance", "notice?"), None),
    ("POST", "compute/preempt-worker"): (
        "compute_preempt_worker",
        ("project", "zone", "name", "worker?", "notice?"),
        None,
    ),
    ("POST", "compute/reservations"): ("compute_reservation", ("body",), None),
    ("POST", "maintenance"): ("maintenance", ("body",), None),
    ("GET", "queued"): ("all_queued", (), _queued),
    ("POST", "queued/fail"): ("queued_control", ("=fail", "name", "message?"), _qr),
    ("POST", "queued/suspend"): ("queued_control", ("=suspend", "name"), _qr),
    ("POST", "queued/suspending"): ("queued_control", ("=suspending", "name"), _qr),
    ("POST", "node-state"): ("set_node_state", ("body",), render_node),
    ("POST", "worker-fault"): ("worker_fault", ("body",), None),
    ("POST", "chips"): ("set_chips", ("body",), None),
    ("POST", "queued/provision"): ("queued_control", ("=provision", "name"), _qr),
    ("POST", "quota-preferences/decide"): ("decide_quota_preference", ("name", "granted"), None),
    ("GET", "monitoring"): ("monitoring.config", (), None),
    ("POST", "monitoring"): ("monitoring.configure", ("body",), None),
    ("POST", "monitoring/sample"): ("monitoring.sample", (), None),
    ("POST", "storage/lifecycle"): ("run_lifecycle", ("days?",), None),
    ("POST", "compute/age"): ("compute_age", ("path", "seconds"), None),
    ("GET", "billing/skus"): ("billing_skus", (), None),
    ("GET", "registry/images"): ("fronts.registry.images", (), None),
    ("POST", "billing/skus"): ("billing_put_sku", ("sku",), None),
}
# (HTTP method, path prefix) -> backend method taking the rest of the path, and renderer
CONTROL_PREFIXES: dict[tuple[str, str], tuple[str, Render | None]] = {
    ("DELETE", "billing/skus/"): ("billing_delete_sku", None),
}


def control_arguments(spec: tuple[str, ...], body: dict[str, Any]) -> list[Any]:
    args: list[Any] = []
    for item in spec:
        if item == "body":
            args.append(body)
        elif item.startswith("="):  # a constant
            args.append(item[1:])
        elif item.endswith("?"):
            args.append(body.get(item[:-1]))
        elif item not in body:
            raise errors.invalid_argument(f"the control call needs '{item}'")
        else:
            args.append(body[item])
    return args


def control_route(method: str, path: str) -> tuple[str, tuple[str, ...], Render | None]:
    """The backend method, the body keys and the renderer of a control call (`path`
    with its prefix); a path under one of CONTROL_PREFIXES passes its rest."""
    key = (method, path[len(CONTROL_PREFIX) :])
    if key in CONTROL_ROUTES:
        return CONTROL_ROUTES[key]
    for (verb, prefix), (name, render) in CONTROL_PREFIXES.items():
        rest = key[1].removeprefix(prefix)
        if verb == method and rest != key[1] and rest and "/" not in rest:
            return name, ("=" + unquote(rest),), render  # the rest: a constant argument
    raise errors.no_route(method, path)
