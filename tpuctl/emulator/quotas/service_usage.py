"""The Service Usage API subset tpuctl uses (serviceusage.googleapis.com, v1): get and
list a project's services, enable one or, with `services.batchEnable`, up to 20 at once
(as `gcloud services enable A B ...` does; a long-running operation), read the
operation.

Like `tpu.api`'s, these functions run with the facade's lock held. An enable takes
`durations["enable_service"]` seconds (0: done at once; null: held until set to a
number); the service is enabled when its operation is done, as the API's propagation
delay makes it in the cloud. Shapes follow google.api.serviceusage.v1 (`Service`,
`EnableServiceResponse`, `OperationMetadata`); an enable of an API already on answers
the done operation `operations/noop.DONE_OPERATION`, as the service does.
"""

from __future__ import annotations

import uuid
from typing import Any

from tpuctl.emulator.core import errors
from tpuctl.emulator.core.state import State
from tpuctl.emulator.iam.access import PAID, SERVICES
from tpuctl.emulator.offerings import apis
from tpuctl.emulator.tpu.models import project_number
from tpuctl.emulator.tpu.rules import listing

_TYPES = "type.googleapis.com/google.api.serviceusage.v1."
NOOP = "operations/noop.DONE_OPERATION"
MAX_BATCH = 20  # https://cloud.google.com/service-usage/docs/reference/rest/v1/services/batchEnable


def tick(state: State, now: float) -> None:
    """Apply the enables whose operation is due."""
    for op in state.access.operations.values():
        due = op["done_at"]
        if not op.get("done") and due is not None and due <= now:
            op["done"] = True
            for service in _services(op):
                _switch_on(state, op["project"], service)
            state.changed()


def _services(op: dict[str, Any]) -> list[str]:
    """What an operation enables: one service, or a batch's."""
    return list(op.get("services") or [op["service"]])


def _switch_on(state: State, project: str, service: str) -> None:
    state.access.set_enabled(project, service)
    if service == apis.QUOTAS and state.quota.api == "disabled":
        state.quota.api = "enabled"  # the same fact, as limits.py keeps it


def _enabled(state: State, project: str, service: str) -> bool:
    on = state.access.enabled(project, service)
    return on and not (service == apis.QUOTAS and state.quota.api == "disabled")


def _known(service: str) -> None:
    if service not in SERVICES:
        info = {
            "@type": errors.ERROR_INFO_TYPE,
            "reason": "SERVICE_CONFIG_NOT_FOUND_OR_PERMISSION_DENIED",
            "domain": apis.SERVICE_USAGE,
            "metadata": {"services": service},
        }
        message = f"Not found or permission denied for service(s): {service}."
        raise errors.ApiError(403, "PERMISSION_DENIED", message, [info])


def _service(state: State, project: str, service: str) -> dict[str, Any]:
    number = project_number(project)
    return {
        "name": f"projects/{number}/services/{service}",
        "parent": f"projects/{number}",
        "config": {"name": service, "title": SERVICES[service]},
        "state": "ENABLED" if _enabled(state, project, service) else "DISABLED",
    }


def get_service(state: State, project: str, service: str) -> dict[str, Any]:
    _known(service)
    return _service(state, project, service)


def list_services(
    state: State, project: str, filter_: str = "", page_size: int = 0, page_token: str = ""
) -> dict[str, Any]:
    """Every service the emulator knows; `filter` "state:ENABLED" or "state:DISABLED"."""
    wanted = filter_.replace(" ", "").removeprefix("state:") if filter_ else ""
    if wanted not in ("", "ENABLED", "DISABLED"):
        raise errors.invalid_argument(f"Invalid filter: {filter_}", "filter")
    services = [_service(state, project, s) for s in sorted(SERVICES)]
    services = [s for s in services if not wanted or s["state"] == wanted]
    return listing("services", services, page_size, page_token)


def enable_service(state: State, project: str, service: str) -> dict[str, Any]:
    _known(service)
    if _enabled(state, project, service):
        return _operation(state, NOOP, project, [service], done=True)
    return _start(state, project, [service])


def batch_enable(state: State, project: str, body: dict[str, Any]) -> dict[str, Any]:
    """`services.batchEnable`: `serviceIds`, 1 to 20 of them, enabled by one operation
    (all or none: an unknown service or a paid one without billing refuses the batch).
    The limit is the API reference's; the wording of the 400s for an empty or too long
    list is the emulator's (the service's own was not found in a public output)."""
    ids = body.get("serviceIds")
    if not isinstance(ids, list) or not ids or not all(isinstance(s, str) and s for s in ids):
        raise errors.invalid_argument("serviceIds must name at least one service.")
    if len(ids) > MAX_BATCH:
        raise errors.invalid_argument(
            f"A batch can enable at most {MAX_BATCH} services; {len(ids)} were given."
        )
    for service in ids:
        _known(service)
    wanted = [s for s in dict.fromkeys(ids) if not _enabled(state, project, s)]
    if not wanted:
        return _operation(state, NOOP, project, list(dict.fromkeys(ids)), done=True)
    return _start(state, project, wanted)


def _start(state: State, project: str, services: list[str]) -> dict[str, Any]:
    paid = [s for s in services if s in PAID]
    if paid and not state.access.billed(project):
        number = project_number(project)
        info = {
            "@type": errors.ERROR_INFO_TYPE,
            "reason": "UREQ_PROJECT_BILLING_NOT_FOUND",
            "domain": apis.SERVICE_USAGE,
            "metadata": {"project": number, "services": ",".join(paid)},
        }
        message = (
            f"Billing account for project '{number}' is not found. Billing must be enabled "
            f"for activation of service(s) '{','.join(paid)}' to proceed."
        )
        raise errors.ApiError(400, "FAILED_PRECONDITION", message, [info])
    seconds = state.durations.get("enable_service", 0.0)
    name = f"operations/acat.p2-{project_number(project)}-{uuid.uuid4()}"
    due = None if seconds is None else state.now() + seconds
    op: dict[str, Any] = {"project": project, "service": services[0], "done_at": due}
    if len(services) > 1:
        op["services"] = services
    state.access.operations[name] = op
    state.changed()
    tick(state, state.now())
    return get_operation(state, name)


def get_operation(state: State, name: str) -> dict[str, Any]:
    op = state.access.operations.get(name)
    if op is None:
        raise errors.not_found(name)
    return _operation(state, name, op["project"], _services(op), bool(op.get("done")))


def _operation(
    state: State, name: str, project: str, services: list[str], done: bool
) -> dict[str, Any]:
    number = project_number(project)
    out: dict[str, Any] = {
        "name": name,
        "metadata": {
            "@type": _TYPES + "OperationMetadata",
            "resourceNames": [f"services/{s}/projectSettings/{number}" for s in services],
        },
    }
    if done and len(services) == 1:
        out["done"] = True
        out["response"] = {
            "@type": _TYPES + "EnableServiceResponse",
            "service": _service(state, project, services[0]),
        }
    elif done:
        out["done"] = True
        out["response"] = {
            "@type": _TYPES + "BatchEnableServicesResponse",
            "services": [_service(state, project, s) for s in services],
        }
    return out
