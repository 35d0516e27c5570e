"""Node lifecycle: validate, create, wait, stop, start, delete.

Services receive a `TpuApi` (the adapter) and report progress through a callback;
they never print and never know which endpoint is behind the adapter.
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tpuctl import catalog, interrupts
from tpuctl.errors import (
    AlreadyExistsError,
    CloudError,
    NoCapacityError,
    NotFoundError,
    QuotaError,
    TpuctlError,
    UsageError,
)
from tpuctl.models import (
    CREATED,
    DEAD_STATES,
    EXPIRES,
    IDLE_TIMEOUT,
    MANAGED_BY,
    MANAGED_BY_VALUE,
    OWNER,
    START_DEADLINE,
    DeleteResult,
    Node,
)
from tpuctl.services.names import local_user, validate_labels, validate_name
from tpuctl.waiting import Progress, noop, poll_until

if TYPE_CHECKING:
    from tpuctl.cloud.quota import QuotaApi
    from tpuctl.cloud.tpu import TpuApi
    from tpuctl.config import Target

FAILED_CREATE_STATES = DEAD_STATES | {"DELETING", "HIDDEN", "UNKNOWN"}


def _suggest(wanted: str, offered: list[str]) -> str:
    close = difflib.get_close_matches(wanted, offered, n=3, cutoff=0.5)
    return f"did you mean {', '.join(close)}?" if close else ""


@dataclass
class CreateSpec:
    name: str
    accelerator: str
    version: str | None = None
    spot: bool = False
    preemptible: bool = False
    reserved: bool = False
    labels: dict[str, str] = field(default_factory=dict)
    metadata: dict[str, str] = field(default_factory=dict)
    network: str | None = None
    subnetwork: str | None = None
    service_account: str | None = None  # None: the project's default compute account
    scopes: list[str] = field(default_factory=list)  # empty: CLOUD_PLATFORM
    internal_ip_only: bool = False
    tags: list[str] = field(default_factory=list)  # network tags (firewall rules)
    description: str = ""
    ttl: int | None = None  # seconds until gc may delete it
    idle_timeout: int | None = None  # seconds of idleness before it goes
    idle_action: str = "delete"  # what its watchdog does then: delete or stop
    start_deadline: int | None = None  # seconds for a job's agent to start (boot guard)


def check_accelerator(api: TpuApi, target: Target, accelerator: str) -> None:
    offered = api.accelerator_types(target.parent)
    if accelerator in offered:
        return
    hints = [_suggest(accelerator, offered)]
    parsed = catalog.parse_accelerator(accelerator)
    if parsed is not None:
        elsewhere = [z for z, gens in catalog.ZONES.items() if parsed.generation in gens]
        if elsewhere:
            hints.append(f"{parsed.name} is offered in {', '.join(elsewhere[:4])} (--zone).")
    raise UsageError(
        f"accelerator type {accelerator!r} is not offered in zone {target.zone}",
        hint=" ".join(h for h in hints if h)
        or f"see the types with `gcloud compute tpus accelerator-types list --zone {target.zone}`",
    )


def check_version(api: TpuApi, target: Target, version: str) -> None:
    offered = api.runtime_versions(target.parent)
    if version not in offered:
        raise UsageError(
            f"runtime version {version!r} is not offered in zone {target.zone}",
            hint=_suggest(version, offered) or f"offered: {', '.join(sorted(offered)[:8])}, ...",
        )


def build_body(spec: CreateSpec, target: Target, now: float | None = None) -> dict[str, Any]:
    """The Node JSON for a create call, labelled as tpuctl's."""
    if spec.spot and spec.preemptible:
        raise UsageError("--spot and --preemptible are exclusive: choose one")
    created = int(now if now is not None else time.time())
    labels = dict(spec.labels)
    labels.update({MANAGED_BY: MANAGED_BY_VALUE, OWNER: local_user(), CREATED: str(created)})
    if spec.ttl:
        labels[EXPIRES] = str(created + spec.ttl)
    metadata = dict(spec.metadata)
    if spec.idle_timeout:
        labels[IDLE_TIMEOUT] = str(spec.idle_timeout)
    if spec.start_deadline:
        labels[START_DEADLINE] = str(created + spec.start_deadline)
    if spec.idle_timeout or spec.start_deadline:
        metadata[STARTUP_SCRIPT] = _startup_script(spec)
    validate_labels(labels)
    body: dict[str, Any] = {
        "acceleratorType": spec.accelerator,
        "runtimeVersion": spec.version,
        "labels": labels,
        "networkConfig": {"enableExternalIps": not spec.internal_ip_only},
    }
    if spec.description:
        body["description"] = spec.description
    if metadata:
        body["metadata"] = metadata
    if spec.network:
        body["networkConfig"]["network"] = spec.network
    if spec.subnetwork:
        body["networkConfig"]["subnetwork"] = spec.subnetwork
    if spec.tags:
        body["tags"] = list(spec.tags)
    body["serviceAccount"] = service_account_body(spec.service_account, spec.scopes)
    sched = {k: True for k in ("spot", "preemptible", "reserved") if getattr(spec, k)}
    if sched:
        body["schedulingConfig"] = sched
    return body


STARTUP_SCRIPT = "startup-script"
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
_SCOPE_PREFIX = "https://www.googleapis.com/auth/"


def parse_scopes(values: list[str]) -> list[str]:
    """OAuth scopes from `--scopes a,b` (repeatable): full URLs, or names under
    https://www.googleapis.com/auth/ (`cloud-platform`)."""
    scopes = [v.strip() for value in values for v in value.split(",") if v.strip()]
    for scope in scopes:
        if "://" in scope and not scope.startswith("https://"):
            raise UsageError(f"invalid --scopes {scope!r}: an https:// URL or a name")
    return [s if s.startswith("https://") else _SCOPE_PREFIX + s for s in scopes]


def service_account_body(email: str | None, scopes: list[str]) -> dict[str, Any]:
    """The node's `serviceAccount`, always sent so that the VM's rights never rest on
    an unstated default. The email is left out when none is named: the API then uses
    the project's default compute account (TPU v2 discovery document, ServiceAccount:
    "If empty, default Compute service account will be used"), which saves a call for
    the project number; the scope is always stated (empty would mean "all Cloud APIs")."""
    body: dict[str, Any] = {"scope": list(scopes) or [CLOUD_PLATFORM]}
    if email:
        if "@" not in email:
            raise UsageError(
                f"invalid --service-account {email!r}: a service account's email address"
            )
        body = {"email": email, **body}
    return body


def _startup_script(spec: CreateSpec) -> str:
    """The startup script that runs the node's idle watchdog and/or its boot guard
    (services/idle.py)."""
    from tpuctl.services.idle import startup_script

    if spec.idle_action not in ("delete", "stop"):
        raise UsageError(f"invalid --idle-action {spec.idle_action!r}: use delete or stop")
    parsed = catalog.parse_accelerator(spec.accelerator)
    if spec.idle_action == "stop" and parsed is not None and parsed.workers > 1:
        raise UsageError(
            f"--idle-action stop: the cloud stops only single-host nodes, and "
            f"{spec.accelerator} has {parsed.workers} workers",
            hint="use --idle-action delete (the default) for a multi-host slice",
        )
    if STARTUP_SCRIPT in spec.metadata:
        raise UsageError(
            "--idle-timeout installs its watchdog as the node's startup-script; "
            "it cannot be combined with --metadata startup-script=...",
            hint="run your own setup over SSH (`tpuctl exec`) or from `tpuctl run --setup`",
        )
    idle_action = spec.idle_action if spec.idle_timeout else None
    return startup_script(idle_action, start_guard=bool(spec.start_deadline))


def validate_create(
    api: TpuApi, target: Target, spec: CreateSpec, quotas: QuotaApi | None = None
) -> dict[str, Any]:
    """Check everything the API would refuse; fill in defaults; return the create body.

    With `quotas`, a create that would exceed its quota is refused here, before the call.
    """
    from tpuctl.services import quota_check

    validate_name(spec.name)
    validate_labels(spec.labels)
    check_accelerator(api, target, spec.accelerator)
    if not spec.version:
        parsed = catalog.parse_accelerator(spec.accelerator)
        spec.version = catalog.default_runtime(parsed.generation if parsed else "v4")
    check_version(api, target, spec.version)
    body = build_body(spec, target)
    try:
        existing = api.get_node(f"{target.parent}/nodes/{spec.name}")
    except NotFoundError:
        existing = None
    if existing is not None:
        raise AlreadyExistsError(
            f"node {spec.name} already exists in zone {target.zone} "
            f"({existing.accelerator_type}, {existing.state})",
            hint=f"use another name, or see it: `tpuctl describe {spec.name} --zone {target.zone}`",
        )
    if quotas is not None:
        quota_check.check_create(api, quotas, target, spec.accelerator, _scheduling(spec))
    return body


def _scheduling(spec: CreateSpec) -> str:
    return catalog.scheduling_name(spec.spot, spec.preemptible, spec.reserved)


def create_node(
    api: TpuApi,
    target: Target,
    spec: CreateSpec,
    body: dict[str, Any] | None = None,
    quotas: QuotaApi | None = None,
) -> str | None:
    """Ask for the node (validating first unless given the body `validate_create` made).

    Returns the create operation's name (None when a retried create adopted the
    node its lost first attempt had made). A quota refusal from the cloud itself
    is explained like tpuctl's own check. A signal during the call interrupts once it
    has returned (`interrupts.deferred`): then the node is known to exist.
    """
    from tpuctl.services import quota_check

    if body is None:
        body = validate_create(api, target, spec, quotas)
    try:
        with interrupts.deferred():  # cut in half, the create may still take effect
            return api.create_node(target.parent, spec.name, body)
    except QuotaError as e:
        raise quota_check.explain_refusal(
            e, api, target, spec.accelerator, _scheduling(spec)
        ) from e


def _operation_error(op: dict[str, Any], subject: str) -> TpuctlError | None:
    err = op.get("error")
    if not err:
        return None
    code, msg = int(err.get("code", 2)), err.get("message", "unknown error")
    if code == 8:  # RESOURCE_EXHAUSTED
        if "capacity" in msg.lower():
            # The zone is out of this TPU type for everyone: no quota would change that.
            return NoCapacityError(
                f"no capacity for {subject}: the zone has no more of this TPU type free right "
                f"now (a shortage in the cloud, not your quota): {msg}",
                hint="try another zone that offers it, or again later; spot capacity (--spot) is "
                "often easier to find than on-demand; a queued resource waits for capacity "
                "instead of failing",
            )
        return QuotaError(
            f"quota exceeded for {subject}: {msg}",
            hint="`tpuctl quota` shows limits, usage and which nodes use them",
        )
    return CloudError(f"{subject} failed: {msg}")


def wait_for_state(
    api: TpuApi,
    name: str,
    until: frozenset[str] | set[str],
    *,
    operation: str | None = None,
    fail_states: frozenset[str] | set[str] = frozenset(),
    progress: Progress = noop,
    timeout: float = 3600.0,
) -> Node:
    """Poll until the node reaches a state in `until`; raise on failure or timeout."""
    subject = name.rsplit("/", 1)[-1]
    op_done = operation is None

    def check() -> tuple[Node | None, str]:
        nonlocal op_done
        if not op_done and operation:
            op = api.get_operation(operation)
            error = _operation_error(op, subject)
            if error:
                raise error
            op_done = bool(op.get("done"))
        try:
            node = api.get_node(name)
        except NotFoundError:
            if op_done:
                raise
            return None, "PENDING"
        if node.state in fail_states:
            raise CloudError(
                f"node {subject} went to {node.state} instead of {'/'.join(sorted(until))}"
                + (f": {node.health_description}" if node.health_description else "")
            )
        return (node if node.state in until else None), node.state

    return poll_until(check, what=subject, progress=progress, timeout=timeout)


def wait_gone(
    api: TpuApi, name: str, *, progress: Progress = noop, timeout: float = 1800.0
) -> None:
    """Poll until the node no longer exists."""

    def check() -> tuple[bool | None, str]:
        try:
            return None, api.get_node(name).state
        except NotFoundError:
            return True, "GONE"

    poll_until(
        check, what=f"{name.rsplit('/', 1)[-1]} to be deleted", progress=progress, timeout=timeout
    )


def set_labels(api: TpuApi, name: str, changes: dict[str, str | None]) -> Node:
    """Set (or, with None, remove) labels; the rest of the node's labels are kept.

    The API replaces the whole label map, so read-modify-write; a concurrent change
    between the read and the write is rare for these labels and harmless to redo.
    """
    node = api.get_node(name)
    labels = dict(node.labels)
    for key, value in changes.items():
        if value is None:
            labels.pop(key, None)
        else:
            labels[key] = value
    validate_labels(labels)
    if labels != node.labels:
        api.update_node(name, {"labels": labels}, ["labels"])
        node.labels = labels
    return node


def require_single_host(node: Node, verb: str) -> None:
    if len(node.workers) > 1:
        raise UsageError(
            f"cannot {verb} {node.name}: {node.accelerator_type} is a multi-host slice "
            f"({len(node.workers)} workers) and the TPU API only stops and starts single-host "
            "nodes",
            hint=f"delete it instead (`tpuctl delete {node.name} --zone {node.zone}`) and "
            "recreate it later",
        )


def delete_nodes(
    api: TpuApi,
    nodes: list[Node],
    *,
    wait: bool = True,
    progress: Callable[[str, str, float], None] | None = None,
    max_parallel: int = 16,
) -> list[DeleteResult]:
    """Delete nodes concurrently; one result per node, in the order given.

    A node already gone or already being deleted counts as deleted.
    """

    def one(node: Node) -> DeleteResult:
        def report(state: str, elapsed: float) -> None:
            if progress:
                progress(node.name, state, elapsed)

        try:
            if node.state != "DELETING":
                try:
                    api.delete_node(node.full_name)
                except NotFoundError:
                    return DeleteResult(node.name, True, "already gone", node)
            if wait:
                wait_gone(api, node.full_name, progress=report)
                return DeleteResult(node.name, True, "deleted", node)
            return DeleteResult(node.name, True, "deletion started", node)
        except TpuctlError as e:
            return DeleteResult(node.name, False, str(e), node, e)

    if not nodes:
        return []
    with ThreadPoolExecutor(max_workers=min(max_parallel, len(nodes))) as pool:
        return list(pool.map(one, nodes))
